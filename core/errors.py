"""Errors phrased for the user, raised by any layer that reads what the user wrote."""


class ConfigError(Exception):
    """A config problem, already phrased for the user (file:line: field: what is wrong)."""
