"""nginx in front of the cluster's nodes: round robin, kept-alive upstream connections that
nginx (never a node) closes, and the APIs' JSON for a request whose headers are too large
(docs/scaling.md, docs/operations.md)."""

from pathlib import Path

from deploy.processes import executable

# nginx's answer to a header line past its buffers (its 494, sent as 431): the APIs' error.
HEADERS_TOO_LARGE_JSON = (
    '{"error_type": "VALIDATION", "code": "request_headers_too_large", '
    '"user_message": "Las cabeceras de la petición son demasiado grandes."}'
)


def nginx_configure(
    directory: Path,
    *,
    port: int,
    node_ports: list[int],
    upstream_keepalive_seconds: int,
    node_keepalive_seconds: int,
) -> list[str]:
    """Write an nginx configuration in `directory` that listens on `port` and spreads over the
    nodes on `node_ports`; return the command that runs it in the foreground."""
    for sub in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
        (directory / sub).chmod(0o777)  # its workers may run as another user
    upstreams = "\n".join(f"        server 127.0.0.1:{p} max_fails=0;" for p in node_ports)
    (directory / "nginx.conf").write_text(
        f"""worker_processes 1;
pid {directory / "nginx.pid"};
error_log {directory / "error.log"} warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {directory / "client_body"};
    proxy_temp_path {directory / "proxy"};
    fastcgi_temp_path {directory / "fastcgi"};
    uwsgi_temp_path {directory / "uwsgi"};
    scgi_temp_path {directory / "scgi"};
    client_max_body_size 2m;
    # Header lines up to 16 kB reach the nodes, so gunicorn's own limit (8190 bytes a line)
    # answers its JSON 431 (gunicorn.conf.py); longer ones are refused here, in JSON too
    # (docs/operations.md, "Oversized requests").
    large_client_header_buffers 4 16k;
    # Clients' idle connections: a client (the Gateway) keeping one idle longer may find it
    # closed while it sends; it retries with the same Idempotency-Key.
    keepalive_timeout 75s;
    # Round robin over the nodes. A node that refuses the connection is skipped for that
    # request; a request already sent is never sent again by nginx (POST is not idempotent
    # to it): the client retries with the same Idempotency-Key and the engine joins it.
    upstream garante {{
{upstreams}
        keepalive 16;
        # Shorter than the nodes' --keep-alive ({node_keepalive_seconds} s): nginx, not a
        # node, closes an idle connection, so nginx never sends a request on one a node is
        # closing (docs/scaling.md).
        keepalive_timeout {upstream_keepalive_seconds}s;
    }}
    server {{
        listen 127.0.0.1:{port};
        error_page 494 =431 /_garante/request_headers_too_large.json;
        location = /_garante/request_headers_too_large.json {{
            internal;
            default_type application/json;
            return 431 '{HEADERS_TOO_LARGE_JSON}';
        }}
        location / {{
            proxy_pass http://garante;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $remote_addr;
            # When the call arrived: the time it waits for a node's thread counts towards its
            # deadline (GARANTE_CALL_DEADLINE_SECONDS, tooling.middleware).
            proxy_set_header X-Request-Start "t=${{msec}}";
            proxy_next_upstream error timeout;
            proxy_connect_timeout 2s;
            proxy_read_timeout 60s;
        }}
    }}
}}
"""
    )
    return [
        executable("nginx"),
        "-p",
        str(directory),
        "-c",
        str(directory / "nginx.conf"),
        "-g",
        "daemon off;",
    ]
