# AppCheck Gateway: one static-stdlib, stripped binary on Debian bookworm-slim, run as a non-root user.
#
#   docker build -t appcheck-gateway .
#   docker run --stop-timeout 15 -p 8080:8080 \
#     -v "$PWD/gateway.yaml:/etc/appcheck-gateway/gateway.yaml:ro" appcheck-gateway
#
# Stop timeout: on SIGTERM the server drains for up to server.limits.shutdown_grace (10s in
# Config/gateway.example.yaml), then exits 0. Docker's default stop timeout is also 10s, after which it sends
# SIGKILL; give it a few seconds more than shutdown_grace (`docker run --stop-timeout 15`, compose
# `stop_grace_period: 15s`, Kubernetes `terminationGracePeriodSeconds`).
#
# The base images are arguments so a machine without a registry can supply local ones
# (.ci/container-test does); the defaults are the public images.
ARG SWIFT_IMAGE=swift:6.3-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

FROM ${SWIFT_IMAGE} AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends libssl-dev libnghttp2-dev libsqlite3-dev libyaml-dev pkg-config binutils \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Package.swift declares the test targets too, and SwiftPM refuses a manifest whose target folders are
# missing: copy Tests/ as well (.dockerignore keeps .build and the rest out of the context).
COPY Package.swift ./
COPY Sources ./Sources
COPY Tests ./Tests
# The cache mount keeps SwiftPM's checkouts and objects between builds on the same machine (BuildKit,
# Podman/Buildah); the binary is copied out of it, stripped (about 80 MB to 60 MB).
RUN --mount=type=cache,target=/src/.build,id=appcheck-gateway-swiftpm \
    swift build -c release --product appcheck-gateway --static-swift-stdlib \
 && install -D -s -m 0755 "$(swift build -c release --show-bin-path)/appcheck-gateway" /out/appcheck-gateway

FROM ${RUNTIME_IMAGE}
# Runtime libraries only: OpenSSL, nghttp2, SQLite, libyaml, CA certificates (for the Firebase key set over HTTPS).
RUN apt-get update \
 && apt-get install -y --no-install-recommends libssl3 libnghttp2-14 libsqlite3-0 libyaml-0-2 ca-certificates tzdata \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/appcheck-gateway --create-home appcheck \
 && mkdir -p /etc/appcheck-gateway \
 && chown appcheck /var/lib/appcheck-gateway
COPY --from=build /out/appcheck-gateway /usr/local/bin/appcheck-gateway
COPY Config/gateway.example.yaml /etc/appcheck-gateway/gateway.yaml
# APPCHECK_GATEWAY_CONFIG: the configuration `serve` reads without --config.
# APPCHECK_GATEWAY_ADMIN_FILE: `serve` writes its bound admin address there and `healthcheck` (without
# --config) probes it, so the HEALTHCHECK follows the configuration the server really runs with, including one
# passed with `serve --config …`.
ENV APPCHECK_GATEWAY_CONFIG=/etc/appcheck-gateway/gateway.yaml \
    APPCHECK_GATEWAY_ADMIN_FILE=/tmp/appcheck-gateway.admin
USER appcheck
WORKDIR /var/lib/appcheck-gateway
# 8080 plain HTTP/1.1, 8443 TLS, 9901 admin (/metrics /healthz /readyz; bind it to 0.0.0.0 in the config to
# scrape it from outside the container).
EXPOSE 8080 8443 9901
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/appcheck-gateway", "healthcheck"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/appcheck-gateway"]
CMD ["serve"]
