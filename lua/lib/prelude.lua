-- prelude.lua - the first half every rate-limit script shares: argument
-- parsing and validation, exact integer helpers, state reads and writes.
-- Not a script of its own: cmake/embed_lua.cmake puts it in place of the line
-- "--#include lib/prelude.lua" of each script in lua/.
-- Every argument and every product the algorithms form stays at or below
-- 2^50, so arithmetic on Lua's doubles is exact integer arithmetic.
local MAX = 1125899906842624

-- The call's keys and arguments: KEYS[K0 + 1 .. K0 + NK] and
-- ARGV[A0 + 1 .. A0 + NA]. A batch (lib/decide.lua, lua/README.md
-- "Batches") points them at each of its calls in turn, with no copy.
local K0, NK, A0, NA = 0, #KEYS, 0, #ARGV

-- Redis TIME in ms, read once per run of the script: the calls of a batch
-- are decided at one instant, as one call's rules are.
local redis_now

-- floor(a / b) for b > 0, exact: never math.floor(a / b), which rounds the
-- quotient before flooring once a is large.
local function floordiv(a, b)
    local r = math.fmod(a, b)
    if r < 0 then
        r = r + b
    end
    return (a - r) / b
end

local function ceildiv(a, b)
    return -floordiv(-a, b)
end

-- The library functions called on every decision, as upvalues: cheaper
-- than a global's lookup and then a field's.
local find, tonumber = string.find, tonumber

-- A decimal integer 0..MAX, or nil: no sign, no fraction, no exponent.
-- Redis hands KEYS and ARGV to the script as strings, always.
-- Each text is read once per run of the script: the calls of a batch
-- repeat their rules' numbers.
local int_of = {}
local function int(s)
    local v = int_of[s]
    if v == nil then
        v = #s <= 16 and find(s, '^%d+$') and tonumber(s) or false
        if v and v > MAX then
            v = false
        end
        int_of[s] = v
    end
    return v or nil
end

-- Numbers go to Redis as exact integers, never as "%.14g" text.
local function str(v)
    return string.format('%d', v)
end

-- What Redis Cluster hashes: the first non-empty {...}, else the whole key.
local function hashtag(key)
    local open = string.find(key, '{', 1, true)
    if open then
        local close = string.find(key, '}', open + 1, true)
        if close and close > open + 1 then
            return string.sub(key, open + 1, close - 1)
        end
    end
    return key
end

-- The error about rule i, whose arguments end at ARGV[at]: the text is
-- built only when there is an error.
local function rule_error(i, at, msg)
    return nil, 'rule ' .. i .. ' (ARGV[' .. (at - 2) .. '..' .. at .. ']): '
        .. msg
end

-- The previous call parse() accepted, and where its words are: the calls
-- of a batch usually repeat their keys and rules, and a call whose keys
-- and arguments are the previous call's word for word, but for its
-- request id, is parsed to the same result.
local last, last_k0, last_a0

local function repeats_last()
    local nk, na = NK, NA
    if not last or nk ~= #last.rules or na ~= last.na then
        return false
    end
    local KEYS, ARGV, k0, a0, lk0, la0 = KEYS, ARGV, K0, A0, last_k0, last_a0
    for i = 1, nk do
        if KEYS[k0 + i] ~= KEYS[lk0 + i] then
            return false
        end
    end
    for i = 1, na do
        if i ~= 5 and ARGV[a0 + i] ~= ARGV[la0 + i] then
            return false
        end
    end
    return true
end

-- The call's arguments as a table (now, cost, delay, maxd, reqid, rules,
-- and op, units for a lease), or nil and what is wrong with them. The
-- table is the caller's until the next parse(), which may return it
-- again with another request id.
local function parse()
    if repeats_last() then
        local reqid = ARGV[A0 + 5]
        if reqid == '' then
            return nil, 'request id (ARGV[5]) is empty'
        end
        -- A lease take may have raised the cost of the previous call.
        last.cost, last.reqid = int(ARGV[A0 + 2]), reqid
        return last
    end
    local KEYS, ARGV, k0, a0 = KEYS, ARGV, K0, A0
    local nkeys = NK
    if nkeys < 1 or nkeys > 8 then
        return nil, 'expected 1 to 8 keys (one per rule), got ' .. nkeys
    end
    -- A lease call (token_bucket and gcra) adds two arguments at the end.
    local leased = LEASE and NA == 7 + 3 * nkeys
    if NA ~= 5 + 3 * nkeys and not leased then
        return nil, 'expected ' .. (5 + 3 * nkeys) .. ' arguments for '
            .. nkeys .. ' keys' .. (LEASE and (' (' .. (7 + 3 * nkeys)
            .. ' with a lease)') or '') .. ', got ' .. NA
    end
    if KEYS[k0 + 1] == '' then
        return nil, 'KEYS[1] is empty'
    end
    -- One key shares its own hash tag and repeats no other.
    if nkeys > 1 then
        local tag = hashtag(KEYS[k0 + 1])
        for i = 2, nkeys do
            if KEYS[k0 + i] == '' then
                return nil, 'KEYS[' .. i .. '] is empty'
            end
            if hashtag(KEYS[k0 + i]) ~= tag then
                return nil, 'KEYS[' .. i .. '] does not share the hash tag '
                    .. 'of KEYS[1]'
            end
            for j = 1, i - 1 do
                if KEYS[k0 + j] == KEYS[k0 + i] then
                    return nil, 'KEYS[' .. i .. '] repeats KEYS[' .. j .. ']'
                end
            end
        end
    end
    local now = int(ARGV[a0 + 1])
    if not now then
        return nil, 'time (ARGV[1]) must be an integer in ms, 0 for TIME'
    end
    local cost = int(ARGV[a0 + 2])
    if not cost or cost < 1 then
        return nil, 'cost (ARGV[2]) must be an integer >= 1'
    end
    local delay
    if ARGV[a0 + 3] == '0' then
        delay = false
    elseif ARGV[a0 + 3] == '1' then
        if not BUCKET then
            return nil, 'delay mode (ARGV[3] = 1) needs token_bucket, '
                .. 'leaky_bucket or gcra'
        end
        delay = true
    else
        return nil, 'mode (ARGV[3]) must be 0 (deny) or 1 (delay)'
    end
    local maxd = int(ARGV[a0 + 4])
    if not maxd then
        return nil, 'max_delay_ms (ARGV[4]) must be an integer >= 0'
    end
    local reqid = ARGV[a0 + 5]
    if reqid == '' then
        return nil, 'request id (ARGV[5]) is empty'
    end
    -- One constructor sizes the table once, where fields added one by one
    -- would grow it several times.
    local a = {now = now, cost = cost, delay = delay,
               maxd = delay and maxd or 0, reqid = reqid, rules = {}}
    for i = 1, nkeys do
        local at = 5 + 3 * i
        local L, W, B = int(ARGV[a0 + at - 2]), int(ARGV[a0 + at - 1]),
                        int(ARGV[a0 + at])
        if not L or L < 1 or not W or W < 1 or not B or B < 1 then
            return rule_error(i, at,
                'limit, window_ms and burst must be integers >= 1')
        end
        if L * W > MAX or B * W > MAX then
            return rule_error(i, at, 'limit * window_ms and burst * '
                .. 'window_ms must not exceed 2^50')
        end
        if a.delay and maxd * L > MAX then
            return rule_error(i, at,
                'max_delay_ms * limit must not exceed 2^50')
        end
        if not BUCKET and B ~= L then
            return rule_error(i, at,
                'burst must equal limit for a window algorithm')
        end
        if a.cost > B then
            return rule_error(i, at, 'cost ' .. a.cost .. ' exceeds '
                .. (BUCKET and 'burst ' or 'limit ') .. B)
        end
        a.rules[i] = {key = KEYS[k0 + i], L = L, W = W, B = B}
    end
    if leased then
        local at = 5 + 3 * nkeys
        local op, units = ARGV[a0 + at + 1], int(ARGV[a0 + at + 2])
        if op ~= 'take' and op ~= 'return' then
            return nil, 'lease operation (ARGV[' .. (at + 1) .. ']) must be '
                .. 'take or return'
        end
        if not units or units < 1 then
            return nil, 'lease units (ARGV[' .. (at + 2) .. ']) must be an '
                .. 'integer >= 1'
        end
        if op == 'take' and units < cost then
            return nil, 'lease units (ARGV[' .. (at + 2) .. ']) must be at '
                .. 'least the cost'
        end
        for i = 1, nkeys do
            if units > a.rules[i].B then
                return nil, 'lease units (ARGV[' .. (at + 2) .. ']) exceed '
                    .. 'burst ' .. a.rules[i].B .. ' of rule ' .. i
            end
        end
        a.op, a.units = op, units
    end
    if a.now == 0 then
        if not redis_now then
            local t = redis.call('TIME')
            redis_now = tonumber(t[1]) * 1000 + floordiv(tonumber(t[2]), 1000)
        end
        a.now = redis_now
    end
    a.na, last, last_k0, last_a0 = NA, a, K0, A0
    return a
end

-- A rule's state, two or three integers that Redis holds as one string
-- joined by ':', as this run of the script last left them: read from
-- Redis and parsed at most once (get()), and written back at most once,
-- with the TTL of its last write, when the run ends (flush()). The calls
-- of a batch on one key then share one GET and one SET, and leave exactly
-- what they would have left one by one: Redis runs a script alone, and
-- expires no key while it runs. The integers stay numbers in between, so
-- a batch formats and parses each state once, not once per call.
-- s1[key] is false when the key has no state (none, deleted, or a value
-- that does not parse); s3[key] is nil for a state of two integers.
local s1, s2, s3, state_ttl, dirty = {}, {}, {}, {}, {}
-- While a call of a batch runs: what its writes replaced, five slots per
-- write (key, s1, s2, s3, TTL), so that a call that fails midway leaves
-- nothing of its own (undo()). 'journal' is false outside a batch.
local journal, journal_n = false, 0

-- Every integer a script writes stays within 2^50: at most 16 digits,
-- after a minus sign if any.
local function fits(s)
    return s == nil or #s <= 16 or #s == 17 and string.byte(s) == 45
end

-- The integers of 'key''s state, read with 'pattern' (two or three
-- captures of digits), or nil when it has none, or its value does not
-- match, or holds an integer longer than any the scripts write (kept as
-- a number, it would not read back as the text it formats to). A script
-- passes the same pattern for every key it reads.
local function get(key, pattern)
    local x = s1[key]
    if x == nil then
        local v = redis.call('GET', key)
        local a, b, c
        if v then
            a, b, c = string.match(v, pattern)
        end
        if a and fits(a) and fits(b) and fits(c) then
            x, s2[key], s3[key] = tonumber(a), tonumber(b), c and tonumber(c)
        else
            x = false
        end
        s1[key] = x
    end
    if x then
        return x, s2[key], s3[key]
    end
    return nil
end

-- Writes the integers a, b (and c, for a state of three) as 'key''s
-- state with a TTL of 'ttl' ms (at least 1 ms: PX 0 is an error).
-- Every value an algorithm writes matches the pattern it reads with.
local function store(key, ttl, a, b, c)
    if journal then
        local n = journal_n
        journal[n + 1], journal[n + 2], journal[n + 3] = key, s1[key], s2[key]
        journal[n + 4], journal[n + 5] = s3[key], state_ttl[key]
        journal_n = n + 5
    end
    if state_ttl[key] == nil then
        dirty[#dirty + 1] = key
    end
    s1[key], s2[key], s3[key], state_ttl[key] = a, b, c, ttl
end

-- No state: the same as a full bucket.
local function del(key)
    store(key, 0, false)
end

-- Starts a journal of the writes of one call of a batch.
local function begin()
    journal, journal_n = journal or {}, 0
    return #dirty
end

-- Takes back the writes since begin() returned 'mark': the call failed.
local function undo(mark)
    for n = journal_n - 4, 1, -5 do
        local key = journal[n]
        s1[key], s2[key], s3[key] = journal[n + 1], journal[n + 2],
                                    journal[n + 3]
        state_ttl[key] = journal[n + 4]
    end
    for i = #dirty, mark + 1, -1 do
        dirty[i] = nil
    end
    journal_n = 0
end

-- Writes back every state the run changed: SET ... PX, or DEL.
local function flush()
    for i = 1, #dirty do
        local key = dirty[i]
        if s1[key] then
            local v
            if s3[key] then
                v = string.format('%d:%d:%d', s1[key], s2[key], s3[key])
            else
                v = string.format('%d:%d', s1[key], s2[key])
            end
            redis.call('SET', key, v, 'PX', str(math.max(1, state_ttl[key])))
        else
            redis.call('DEL', key)
        end
    end
end
