#!lua
--[[
gcra.lua - sluice rate limiter, GCRA (generic cell rate algorithm): one
unit every W / L ms, with up to B units at once; decides exactly like
token_bucket but stores one point in time instead of a level.

Semantics exactly as src/limit/algo.h states them (the C twin's contract; a
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
local LEASE = true

--#include lib/prelude.lua

-- The distance d (1/L ms ticks) of a rule's tat ahead of 'now'; 0 if none.
local function backlog(rule, now)
    local d = 0
    local tat, f = get(rule.key, '^(%d+):(%d+)$')
    -- tat < now makes (tat - now) * L + f negative, as 0 <= f < L.
    if tat and tat >= now then
        d = (tat - now) * rule.L + f
    end
    return d
end

-- Writes tat = now + nd / L ms with its fraction.
local function store_tat(rule, now, nd)
    local q = floordiv(nd, rule.L)
    store(rule.key, ceildiv(nd, rule.L), now + q, nd - q * rule.L)
end

local function evaluate(rule, a)
    local L, W, B, now = rule.L, rule.W, rule.B, a.now
    local full = B * W
    local d = backlog(rule, now)
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
        nd = nd,
    }
    return r
end

-- Writes what evaluate() found, once every rule admits.
local function commit(rule, a, r)
    store_tat(rule, a.now, r.nd)
end

-- A lease's unused units move tat back by units * W / L ms, never to
-- before now (lua/README.md, "Leases"). Returns the units left and
-- reset_ms.
local function restore(rule, a, units)
    local W, B, now = rule.W, rule.B, a.now
    local nd = math.max(0, backlog(rule, now) - units * W)
    if nd == 0 then
        del(rule.key)
    else
        store_tat(rule, now, nd)
    end
    return math.max(0, floordiv(B * W - nd, W)), ceildiv(nd, rule.L)
end

--#include lib/decide.lua
