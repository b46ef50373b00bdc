data=$(mktemp -d)
trizk-server --port 0 --testing --data-dir "$data" > "$data.ready" 2> "$data.log" &
server=$!
for _ in $(seq 100); do grep -q '^trizk-server ready' "$data.ready" && break; sleep 0.1; done
PORT=$(sed -n 's/^trizk-server ready .* port=\([0-9]*\).*/\1/p' "$data.ready")
TESTING=$(sed -n 's/^trizk-server ready .* testing=\([^ ]*\).*/\1/p' "$data.ready")
