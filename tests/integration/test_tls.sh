#!/usr/bin/env bash
# TLS + bearer token on every channel: dispatcher, worker and client with a
# test CA (mutual TLS) and a token give the --local digests; a client
# without the token, or in plaintext, gets a clear error and exit 1; the
# status HTTP endpoint with http_token_file answers 401 without it.
source "$(dirname "$0")/lib.sh"
OSSL=/usr/bin/openssl
[ -x "$OSSL" ] || fail "$OSSL not found"

make_images "$TMP/data" 2 12
write_train_spec "$TMP/spec.json" 1
"$BIN/sluice" run "$TMP/spec.json" --local --data-root "$TMP/data" --quiet --threads 2 \
    --digests "$TMP/local"
sort "$TMP/local" >"$TMP/local.s"

# A CA, and one certificate for localhost/127.0.0.1 used as server and client.
C="$TMP/pki"
mkdir -p "$C"
"$OSSL" req -x509 -newkey rsa:2048 -nodes -keyout "$C/ca.key" -out "$C/ca.pem" -days 2 \
    -subj "/CN=sluice test CA" 2>/dev/null
"$OSSL" req -newkey rsa:2048 -nodes -keyout "$C/node.key" -out "$C/node.csr" \
    -subj "/CN=localhost" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' \
    >"$C/ext.cnf"
"$OSSL" x509 -req -in "$C/node.csr" -CA "$C/ca.pem" -CAkey "$C/ca.key" -CAcreateserial \
    -out "$C/node.pem" -days 2 -extfile "$C/ext.cnf" 2>/dev/null
umask 077
printf 's3cret-token\n' >"$TMP/token"
printf 'http-token\n' >"$TMP/http_token"
TLS=(--tls-cert "$C/node.pem" --tls-key "$C/node.key" --tls-ca "$C/ca.pem")

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 8 --heartbeat-ms 100 "${TLS[@]}" --token-file "$TMP/token" \
    --http-token-file "$TMP/http_token"
start_daemon W1 "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
    --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1 "${TLS[@]}" --token-file "$TMP/token"

"$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
    --threads 1 --offload all --digests "$TMP/remote" --json "${TLS[@]}" \
    --token-file "$TMP/token" >"$TMP/remote.json"
sort "$TMP/remote" >"$TMP/remote.s"
cmp -s "$TMP/remote.s" "$TMP/local.s" || fail "TLS + token: digests differ from --local"
grep -q '"local":0,' "$TMP/remote.json" || fail "TLS run did not use the worker"
echo "TLS + token: digests identical to --local"

rc=0
"$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
    --threads 1 --offload all "${TLS[@]}" --dispatcher-timeout 2000 \
    >/dev/null 2>"$TMP/notoken.err" || rc=$?
[ "$rc" -eq 1 ] || fail "client without the token: exit $rc, expected 1"
grep -q "UNAUTHENTICATED" "$TMP/notoken.err" || {
    cat "$TMP/notoken.err"
    fail "client without the token: no UNAUTHENTICATED"
}
echo "no token: $(head -n 1 "$TMP/notoken.err")"

rc=0
timeout 30 "$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" \
    --quiet --threads 1 --offload all --token-file "$TMP/token" \
    --dispatcher-timeout 2000 >/dev/null 2>"$TMP/plain.err" || rc=$?
[ "$rc" -eq 1 ] || { cat "$TMP/plain.err"; fail "plaintext client: exit $rc, expected 1"; }
grep -q "a TLS dispatcher needs --tls-ca" "$TMP/plain.err" || {
    cat "$TMP/plain.err"
    fail "plaintext client: unclear error"
}
echo "plaintext client: $(head -n 1 "$TMP/plain.err")"

code=$(curl -s -o /dev/null -w '%{http_code}' "http://$D_HTTP/status")
[ "$code" = 401 ] || fail "status without the http token: HTTP $code, expected 401"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer http-token" \
    "http://$D_HTTP/status")
[ "$code" = 200 ] || fail "status with the http token: HTTP $code, expected 200"
# /healthz answers without it (probes cannot send one), and tells nothing more.
code=$(curl -s -o "$TMP/healthz" -w '%{http_code}' "http://$D_HTTP/healthz")
[ "$code" = 200 ] || fail "healthz without the http token: HTTP $code, expected 200"
[ "$(cat "$TMP/healthz")" = ok ] || fail "healthz body: $(cat "$TMP/healthz")"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$D_HTTP/metrics")
[ "$code" = 401 ] || fail "metrics without the http token: HTTP $code, expected 401"
echo "status endpoint: 401 without the token, 200 with it; /healthz open"
