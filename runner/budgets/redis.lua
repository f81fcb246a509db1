-- The shared lane budget's one atomic step (runner/budget_redis.py says what each argument is).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local proc, ttl = ARGV[1], tonumber(ARGV[2])
local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
for _, p in ipairs(dead) do redis.call('HDEL', KEYS[3], p) end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if ttl > 0 then redis.call('ZADD', KEYS[2], now + ttl, proc) else redis.call('ZREM', KEYS[2], proc) end
local st = redis.call('HMGET', KEYS[1], 'tat', 'tok', 'pause', 'factor')
local tat, tok = tonumber(st[1]) or 0, tonumber(st[2]) or 0
local pause, factor = tonumber(st[3]) or 0, tonumber(st[4]) or 1
if ARGV[11] ~= '' then factor = tonumber(ARGV[11]) end
if tonumber(ARGV[10]) > 0 then pause = math.max(pause, now + tonumber(ARGV[10])) end
local mine = tonumber(redis.call('HGET', KEYS[3], proc) or '0')
local delta, granted = tonumber(ARGV[4]), 0
if delta > 0 then
  local total = 0
  for _, v in ipairs(redis.call('HVALS', KEYS[3])) do total = total + tonumber(v) end
  granted = math.max(0, math.min(delta, tonumber(ARGV[3]) - total))
elseif delta < 0 then
  granted = math.max(delta, -mine)
end
mine = mine + granted
if mine > 0 then redis.call('HSET', KEYS[3], proc, mine) else redis.call('HDEL', KEYS[3], proc) end
local T, Tt = tonumber(ARGV[8]) / factor, tonumber(ARGV[9]) / factor
local n, tokens, d = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]) * Tt
if delta > 0 and granted < delta and n > 0 then  -- the key's concurrency cap: slots only for leased calls
  local given = math.max(0, n - delta + granted)
  tokens = math.floor(tokens * given / n)
  n = given
end
if d < 0 then tok = math.max(tok + d, math.min(tok, now)) else tok = tok + d end
local start = math.max(now, pause)
if n > 0 then
  if T > 0 then start = math.max(start, tat) end
  if Tt > 0 and tokens > 0 then start = math.max(start, tok) end
  if T > 0 then tat = start + n * T end
  if Tt > 0 and tokens > 0 then tok = start + tokens * Tt end
end
redis.call('HSET', KEYS[1], 'tat', tat, 'tok', tok, 'pause', pause, 'factor', factor)
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], 86400000) end
return {granted, tostring(start), tostring(T), tostring(math.max(0, pause - now)),
        tostring(factor), redis.call('ZCARD', KEYS[2]), tostring(now), n, tostring(Tt)}
