-- token_bucket.lua - the classic Redis token bucket, in the shape the Redis
-- rate-limiting policies of OpenResty gateways use (read the state, refill
-- it for the time elapsed, take the cost, write the state back with a TTL).
-- bench/run.sh loads it once with SCRIPT LOAD and the nginx + ngx_lua +
-- lua-resty-redis rows call it with EVALSHA on every request.
--
--   EVALSHA <sha> 1 <key> <rate> <burst> <now_ms> <cost>
--
-- rate: tokens per second; burst: the bucket's capacity; now_ms: the
-- caller's clock in milliseconds; cost: tokens this request takes.
-- Reply: { allowed (1 or 0), tokens left (rounded down) }.

local key = KEYS[1]
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])

local state = redis.call('HMGET', key, 'tokens', 'timestamp')
local tokens = tonumber(state[1]) or burst
local last = tonumber(state[2]) or now

-- Refill for the time elapsed since the last request, up to the capacity.
local elapsed = math.max(0, now - last)
tokens = math.min(burst, tokens + elapsed * rate / 1000)

local allowed = 0
if tokens >= cost then
    tokens = tokens - cost
    allowed = 1
end

-- Written on every call, refused or not, and kept as long as the bucket
-- takes to fill up again (then a missing key means a full bucket).
redis.call('HSET', key, 'tokens', tokens, 'timestamp', now)
redis.call('PEXPIRE', key, math.ceil(burst / rate * 1000) + 1000)

return { allowed, math.floor(tokens) }
