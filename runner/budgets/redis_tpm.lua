local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local proc, rate, cap = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local held, delta, n_wait = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local tpm, seen, shallow = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local defer, n_sent = tonumber(ARGV[10]), tonumber(ARGV[11])
local block, block_h = tonumber(ARGV[12]), tonumber(ARGV[13])  -- a block of tokens asked for (0: none), its hold
local w0 = 14 + 5 * n_sent  -- (its waiting calls' arguments: after its sends')
local function alive(p)
  if p == proc then return true end
  local s = redis.call('ZSCORE', KEYS[4], p)
  return s and tonumber(s) > now
end
local st = redis.call('HMGET', KEYS[1], 'level', 'at', 'seq', 'depth', 'ceil', 'unsent', 'ep', 'lf')
local level, at, seq = tonumber(st[1]) or cap, tonumber(st[2]) or now, tonumber(st[3]) or 0
-- the charges of calls admitted and not yet sent that the key's bucket still holds beside the account's
-- (it charges them when they go): what it holds more than the account, in every process. A bucket full
-- meanwhile lost that refill, the account's not: `unsent` shrinks by it, each call's part in proportion
-- (`lf`: the log of what is left of a charge admitted at lf = 0; `ep`: a new count once none is left)
local unsent, ep, lf = tonumber(st[6]) or 0, st[7] or (t[1] .. '.' .. t[2]), tonumber(st[8]) or 0
local function lost(raw, lim)  -- the account's level was `raw` before it was cut to `lim`
  local u = math.max(0, math.min(unsent, lim - raw))
  if u < unsent then
    if u <= 0 then ep, lf = t[1] .. '.' .. t[2], 0 else lf = lf + math.log(u / unsent) end
    unsent = u
  end
end
-- the key's bucket as its answers' remaining-tokens showed it (0: unknown, a second of the rate; halved
-- by each refusal for tokens, down to that second: LocalBudget.learn_depth / shallow)
local depth, ceil = tonumber(st[4]) or 0, tonumber(st[5]) or 0
local function bucket() return math.max(cap, math.min(depth, tpm)) end
local full = bucket()
level = level + math.max(0, now - at) * rate / 1000000
lost(level, full)
level = math.min(full, level)
local function credit(d)  -- answers settled: credit beyond the bucket's depth is gone
  level = level + d
  lost(level, full)
  level = math.min(full, level)
end
-- this process's calls sent ('s': the key charges them now) or dropped unsent ('d': it never will) since its
-- last call, each with its charge, its admission's ep and lf, and the settlements made before it (of `delta`):
-- what the key still held of it leaves `unsent`; a call sent is charged what the key lost of it (the refill
-- the account kept and the key's bucket, full, could not), one dropped is given back what the key still held
local done = 0
for j = 0, n_sent - 1 do
  local a = 14 + 5 * j
  local c, pre = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 4])
  credit(pre - done)
  done = pre
  local e = 0
  if ARGV[a + 2] == ep then e = math.min(c, unsent, c * math.exp(lf - tonumber(ARGV[a + 3]))) end
  unsent = math.max(0, unsent - e)
  if ARGV[a] == 's' then level = level - (c - e) else level = level + e end
end
credit(delta - done)
if seen > 0 then  -- the key's first: what its deeper bucket held beyond the second counted is credited
  if depth == 0 then level = level + math.max(0, math.min(seen, tpm) - cap) end
  depth = math.max(depth, seen)
  if ceil > 0 then depth = math.min(depth, ceil) end
end
for _ = 1, shallow do
  if depth > 0 then depth = depth / 2; ceil = depth end
end
cap = bucket()
lost(level, cap)
level = math.min(cap, level)
-- refused for tokens until `defer` s from now: no token for anyone before then (requests still go); the key
-- holds none of the calls not yet sent either (it charges them when they go)
if defer > 0 then
  level = math.min(level, -defer * rate)
  lost(cap, 0)
end
-- this process's calls that left the queue without being admitted (cancelled, or it fell back)
local i = w0 + 2 * n_wait
while ARGV[i] do redis.call('ZREM', KEYS[2], ARGV[i]); i = i + 1 end
-- its waiting calls, in arrival order: entered if new (or lost in a restart); a call refused for tokens
-- whose reset passed goes first
for j = 0, n_wait - 1 do
  local m = ARGV[w0 + 2 * j]
  if not redis.call('ZSCORE', KEYS[2], m) then
    local s
    if ARGV[w0 + 1 + 2 * j] == '1' then
      local head = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
      s = (tonumber(head[2]) or seq) - 1
    else
      seq = seq + 1
      s = seq
    end
    redis.call('ZADD', KEYS[2], s, m)
  end
end
-- the largest rest a call in flight is expected to settle beyond its charge, over the processes alive
-- (each says its own largest: a hold lives as long as its process's heartbeat)
local top = held
local hs = redis.call('HGETALL', KEYS[3])
for j = 1, #hs, 2 do
  if hs[j] ~= proc then
    if alive(hs[j]) then top = math.max(top, tonumber(hs[j + 1])) else redis.call('HDEL', KEYS[3], hs[j]) end
  end
end
local admitted, hint = {}, -1
while true do
  local head = redis.call('ZRANGE', KEYS[2], 0, 0)
  if #head == 0 then break end
  local m = head[1]
  local p, c, h = string.match(m, '^(.*)|%d+|(%d+)|(%d+)$')
  if not p or not alive(p) then
    redis.call('ZREM', KEYS[2], m)
  else
    c, h = tonumber(c), tonumber(h)
    if p ~= proc then  -- its process takes it, or learns how long its refill takes (its own timer)
      wake(KEYS[5] .. p, true)  -- (redis_call.WAKE_LUA)
      break
    end
    local need = math.min(c + h + top, cap)
    if level < need then
      hint = math.ceil((need - level) / rate * 1000000)
      break
    end
    level = level - c
    unsent = unsent + c
    held = math.max(held, h)
    top = math.max(top, h)
    redis.call('ZREM', KEYS[2], m)
    admitted[#admitted + 1] = m
  end
end
-- a block of tokens for this process's next calls (admitted as one call is, spent by them without a script call
-- each, what is left given back as a call dropped unsent): only while nobody waits and the bucket stays at least
-- half full after it, so a key whose TPM binds admits call by call, first come first served, as without blocks
local granted, queued = 0, redis.call('ZCARD', KEYS[2]) > 0
if block > 0 and not queued and defer <= 0 and level - block >= cap / 2 and level >= block + block_h + top then
  level = level - block
  unsent = unsent + block
  held = math.max(held, block_h)
  top = math.max(top, block_h)
  granted = block
end
if held > 0 then redis.call('HSET', KEYS[3], proc, held) else redis.call('HDEL', KEYS[3], proc) end
redis.call('HSET', KEYS[1], 'level', tostring(level), 'at', now, 'seq', seq, 'depth', tostring(depth),
           'ceil', tostring(ceil), 'unsent', tostring(unsent), 'ep', ep, 'lf', string.format('%.17g', lf))
for j = 1, 3 do redis.call('PEXPIRE', KEYS[j], 86400000) end
return {tostring(hint), tostring(level), tostring(top), admitted, tostring(depth), ep, string.format('%.17g', lf),
        granted, queued and 1 or 0}
