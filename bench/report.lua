-- report.lua - wrk script for the timed runs of bench/run.sh: sends the
-- plain GET of the command line and, at the end, prints one line that the
-- script reads instead of wrk's human-readable report (same numbers: wrk's
-- "Requests/sec" is requests / duration, and "Non-2xx or 3xx responses"
-- is errors.status).

function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
        "BENCH requests=%.0f duration_us=%.0f non2xx=%.0f connect=%.0f " ..
        "read=%.0f write=%.0f timeout=%.0f p50_us=%.0f p99_us=%.0f\n",
        summary.requests, summary.duration, e.status, e.connect, e.read,
        e.write, e.timeout, latency:percentile(50), latency:percentile(99)))
end
