-- count.lua - wrk script for the counted runs of bench/run.sh: stops after
-- N responses, over the keep-alive connections wrk opened.
--
--   wrk -t1 -c50 -d600s -s bench/count.lua URL -- N [MARKER]
--
-- At the N-th response the (only) thread stops and creates the file MARKER.
-- wrk's main thread still sleeps for the whole -d, so bench/run.sh sends
-- wrk SIGINT once MARKER exists, and wrk prints its summary as usual; -d is
-- only a deadline. Requests still in flight at the N-th response (at most
-- one per connection) may reach the server too, so bench/run.sh counts
-- what the backend actually served instead of trusting N.

local limit, seen, marker = 1000, 0, nil

function init(args)
    limit = tonumber(args[1]) or limit
    marker = args[2]
end

function response(status, headers, body)
    seen = seen + 1
    if seen == limit then
        wrk.thread:stop()
        if marker then
            local f = io.open(marker, "w")
            if f then f:close() end
        end
    end
end

function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
        "BENCH requests=%.0f duration_us=%.0f non2xx=%.0f connect=%.0f " ..
        "read=%.0f write=%.0f timeout=%.0f p50_us=%.0f p99_us=%.0f\n",
        summary.requests, summary.duration, e.status, e.connect, e.read,
        e.write, e.timeout, latency:percentile(50), latency:percentile(99)))
end
