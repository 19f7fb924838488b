#!lua
--[[
gcra.lua - sluice rate limiter, GCRA (generic cell rate algorithm): one
unit every W / L ms, with up to B units at once; decides exactly like
token_bucket but stores one point in time instead of a level.

Semantics exactly as src/algo.h states them (the C twin's contract; a
differential test compares the two); arguments and reply: lua/README.md.
The theoretical arrival time is tat = t + f / L ms (0 <= f < L), so the
emission interval W / L keeps its fraction. Distances are counted in 1/L ms
ticks; a unit costs W ticks and the bucket holds B * W. State per rule:
the string "<t>:<f>" (t = tat in whole ms), read with GET and written only
on admission with SET ... PX, with a TTL of the time until tat (when the
state is as good as absent). A value that does not parse counts as no
state.
]]
local BUCKET = true

--#include lib/prelude.lua

local function evaluate(rule, a)
    local L, W, B, now, key = rule.L, rule.W, rule.B, a.now, rule.key
    local full = B * W
    local st = redis.call('GET', key)
    local d = 0
    local t, f
    if st then
        t, f = string.match(st, '^(%d+):(%d+)$')
    end
    if t then
        local tat = tonumber(t)
        -- tat < now makes (tat - now) * L + f negative, as 0 <= f < L.
        if tat >= now then
            d = (tat - now) * L + tonumber(f)
        end
    end
    local nd = d + a.cost * W
    local wait = 0
    if nd > full then
        wait = ceildiv(nd - full, L)
    end
    local r = {
        ok = wait <= a.maxd,
        wait = wait,
        rem_after = math.max(0, floordiv(full - nd, W)),
        reset_after = ceildiv(nd, L),
        rem_now = math.max(0, floordiv(full - d, W)),
        reset_now = ceildiv(d, L),
        retry = wait - a.maxd,
    }
    r.commit = function()
        local q = floordiv(nd, L)
        store(key, string.format('%d:%d', now + q, nd - q * L),
              r.reset_after)
    end
    return r
end

--#include lib/decide.lua
