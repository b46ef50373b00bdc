curl -s "$TESTING/dump"                                 # tree, sessions, watches as JSON
curl -s -X POST "$TESTING/drop?session=$SESSION_ID"     # {"dropped": 1}: the session stays
curl -s -X POST "$TESTING/expire?session=$SESSION_ID"   # {"expired": true}, once committed
curl -s -X POST "$TESTING/advance?seconds=60"           # {"clock_offset_ms": 60000}
curl -s -X POST "$TESTING/drop"                         # every connection
kill "$server"; wait "$server"; rm -rf "$data" "$data.ready" "$data.log"
