-- The shared lane budget's one atomic step (runner/budgets/redis.py says what each argument is).
-- Leases are absolute: a process says how many it wants to hold and how many its tasks are bound to;
-- it never holds fewer than the bound ones, nor more than the key's cap leaves beside the others. A lease
-- exists only under a live heartbeat: a process that stops calling loses its leases after its ttl.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local proc, ttl, cap = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local want, bound = tonumber(ARGV[4]), tonumber(ARGV[5])
-- Time in which nobody could call (Redis frozen, or every process gone) does not count toward a
-- heartbeat's expiry: beyond half a lease of silence on the key, every deadline moves by the excess.
local last = tonumber(redis.call('HGET', KEYS[1], 'last'))
-- Leases held: the processes alive on the key call in turns (a round-robin of SLOT_S slots on this clock, by
-- their rank below: redis.py), its holders and the others (told `others` below), so a silence this long is a
-- Redis that stood still, not a holder gone (SIGKILLed: its leases wait for their expiry, the others call on)
local busy = redis.call('HLEN', KEYS[3]) > 0
if ttl > 0 and last and now - last > ttl / 2 then
  local shift = now - last - ttl / 2
  local ps = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
  for i = 1, #ps, 2 do redis.call('ZADD', KEYS[2], tonumber(ps[i + 1]) + shift, ps[i]) end
end
local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
local freed = 0  -- leases that come free in this call: processes waiting for one are woken
for _, p in ipairs(dead) do
  freed = freed + (tonumber(redis.call('HGET', KEYS[3], p)) or 0)
  redis.call('HDEL', KEYS[3], p)
  redis.call('ZREM', KEYS[5], p)
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if ttl > 0 then redis.call('ZADD', KEYS[2], now + ttl, proc) else redis.call('ZREM', KEYS[2], proc) end
-- the processes with calls running or waiting: the key's leases are shared among them, an idle
-- process's share lent to the busy ones until it has work again
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
if ttl > 0 and ARGV[16] == '1' then redis.call('ZADD', KEYS[4], now + ttl, proc) else redis.call('ZREM', KEYS[4], proc) end
local held = redis.call('HGETALL', KEYS[3])
local others, mine = 0, 0
for i = 1, #held, 2 do
  if held[i] == proc then  -- ours: set below
    mine = tonumber(held[i + 1])
  elseif redis.call('ZSCORE', KEYS[2], held[i]) then
    others = others + tonumber(held[i + 1])
  else  -- a lease with no heartbeat behind it (its holder left or its entry was lost): free
    freed = freed + tonumber(held[i + 1])
    redis.call('HDEL', KEYS[3], held[i])
  end
end
local st = redis.call('HMGET', KEYS[1], 'tat', 'pause', 'factor', 'born', 'outage')
local fresh = now + tonumber(ARGV[11])  -- no state (a new key, or Redis restarted): slots granted
local tat = tonumber(st[1]) or fresh  -- before it may still be due
local born = st[4] or tostring(now)  -- when this state began: a process that saw another lost it
local outage = tonumber(st[5]) or 0  -- when Redis last answered after an outage (a process may pace
-- locally until the first RECOVER_S boundary from then: the others wait for it, redis.py)
if busy and last and now - last > tonumber(ARGV[12]) then
  born = tostring(now)  -- a busy key silent this long: Redis stood still, every process falls back
end
if not st[4] then  -- no state: a new key, or a Redis (re)started so recently that processes which met
  -- its restart may still pace locally, and nothing here says so: the outage is its start (the
  -- latest it can be, uptime being whole seconds)
  local up = tonumber(string.match(redis.call('INFO', 'server'), 'uptime_in_seconds:(%d+)'))
  if up and up * 1000000 < tonumber(ARGV[14]) then outage = now - math.max(0, up - 1) * 1000000
  elseif ARGV[13] ~= '' then outage = now end  -- lost otherwise (flushed, evicted, a failover)
elseif born ~= ARGV[13] and (ARGV[13] ~= '' or born == tostring(now) and busy) and outage < tonumber(born) then
  outage = now  -- (once per new state: the first process to find it)
end
-- A caller that has not seen this state (it joined, returns, or finds an outage: it learns of it from
-- this reply) takes no lease nor slot beyond its running calls': processes pacing locally may hold them.
if born ~= ARGV[13] then want = math.min(want, bound) end
-- Processes under their share whose calls wait for a lease queue for one (KEYS[5], by when they began
-- to wait): a lease that comes free goes to the first, whom it wakes (its wake list), never to a caller
-- behind it nor to one not waiting; while any wait, a caller keeps no spare lease beyond its share.
local giving = ttl > 0 and ARGV[17] == '2'  -- its turn is over: its spare leases go to those queued first
-- A process whose calls wait keeps its place while it says so, whatever this call asks: its heartbeat
-- (want = held) and its slots' calls ask for no lease, and must not send it to the back behind later ones.
local waits = giving or ttl > 0 and ARGV[17] == '1' and (want > mine or redis.call('ZSCORE', KEYS[5], proc))
local left = 0
if giving then
  redis.call('ZADD', KEYS[5], now, proc)  -- (at the back)
elseif waits then
  if not redis.call('ZSCORE', KEYS[5], proc) then redis.call('ZADD', KEYS[5], now, proc) end
else
  left = redis.call('ZREM', KEYS[5], proc)
end
local ahead = waits and redis.call('ZRANK', KEYS[5], proc) or redis.call('ZCARD', KEYS[5])
local new = 0
if ttl > 0 then  -- calls already running keep theirs (after a lapse or a restart too); beyond them,
  local room = cap - others  -- only what the cap leaves, even if held before
  local keep = math.min(mine, room)
  -- never beyond its share of the processes with work now, whatever its own (maybe stale) count
  -- asked for: an idle process's share is lent, one with work waiting keeps it
  local share = math.ceil(cap / math.max(1, redis.call('ZCARD', KEYS[4])))
  if ahead > 0 then
    if giving then keep = math.min(keep, bound) end
    new = math.max(bound, math.min(want, keep, share))
  else
    new = math.max(bound, math.min(want, room, share))
  end
end
if new > 0 then redis.call('HSET', KEYS[3], proc, new) else redis.call('HDEL', KEYS[3], proc) end
if waits and new > mine then  -- served (at the back if it waits again): a wake-up meant for it is spent
  left = redis.call('ZREM', KEYS[5], proc)
  redis.call('DEL', KEYS[6] .. proc)
end
freed = freed + math.max(0, mine - new)
local free = cap - others - new
-- wake the first waiters for the leases free now: after leases came free, or after a waiter left the
-- queue (served, or no longer waiting), since one behind it may have had its wake-up meanwhile
if free > 0 and (freed > 0 or left > 0) then
  local n = 0
  for _, p in ipairs(redis.call('ZRANGE', KEYS[5], 0, free)) do
    if p ~= proc and n < free then
      wake(KEYS[6] .. p)  -- (redis_call.WAKE_LUA, prepended at load)
      n = n + 1
    end
  end
end
-- slots: every leased ticket gets one; a new ticket only with a lease of its own
local nL, nU = tonumber(ARGV[6]), tonumber(ARGV[7])
local kU = born == ARGV[13] and math.min(nU, math.max(0, new - bound)) or 0
local n = nL + kU
local pause, factor = tonumber(st[2]) or 0, tonumber(st[3]) or 1
if ARGV[10] ~= '' then factor = tonumber(ARGV[10]) end
if tonumber(ARGV[9]) > 0 then pause = math.max(pause, now + tonumber(ARGV[9])) end
local T = tonumber(ARGV[8]) / factor
-- a process back from local pacing: its sends of the last second take their slots before anyone's
if T > 0 and tonumber(ARGV[15]) > 0 then tat = math.max(tat, now) + tonumber(ARGV[15]) * T end
local start = math.max(now, pause)
if n > 0 and T > 0 then
  start = math.max(start, tat)
  tat = start + n * T
end
redis.call('HSET', KEYS[1], 'tat', tat, 'pause', pause, 'factor', factor, 'born', born, 'last', now, 'outage', outage)
for i = 1, 5 do redis.call('PEXPIRE', KEYS[i], 86400000) end
-- The key's heartbeat round-robin (redis.py): the processes that call in turns while its leases are held, those
-- that knew it busy at their last call and do not wait for a lease (those call after each wake-up wait anyway),
-- each with its rank among them by name; a dead one keeps its turn until its heartbeat expires. Rebuilt as they
-- call once no lease is held (a process that has not called since the key became busy is not counted on).
local turns = {}
if redis.call('HLEN', KEYS[3]) == 0 then
  redis.call('DEL', KEYS[7])
else
  if ttl > 0 and (new > 0 or others > 0 and ARGV[17] == '0') then redis.call('SADD', KEYS[7], proc)
  else redis.call('SREM', KEYS[7], proc) end
  for _, p in ipairs(redis.call('SMEMBERS', KEYS[7])) do
    if redis.call('ZSCORE', KEYS[2], p) then table.insert(turns, p) else redis.call('SREM', KEYS[7], p) end
  end
  table.sort(turns)
  redis.call('PEXPIRE', KEYS[7], 86400000)
end
local rank = -1
for i, p in ipairs(turns) do if p == proc then rank = i - 1 end end
return {new, tostring(start), tostring(T), tostring(math.max(0, pause - now)),
        tostring(factor), redis.call('ZCARD', KEYS[2]), tostring(now), n, born,
        tostring(now - outage), redis.call('ZCARD', KEYS[4]),
        redis.call('ZCARD', KEYS[5]) - (redis.call('ZSCORE', KEYS[5], proc) and 1 or 0), others, rank, #turns}
