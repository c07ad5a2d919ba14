# syntax=docker/dockerfile:1
# AppCheck Gateway: one static-stdlib binary on Debian bookworm-slim, run as a non-root user.

FROM swift:6.3-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends libssl-dev libnghttp2-dev libsqlite3-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Resolve dependencies first so they cache independently of the sources.
COPY Package.swift ./
RUN swift package resolve
COPY Sources ./Sources
RUN swift build -c release --product appcheck-gateway --static-swift-stdlib \
 && install -D -m 0755 "$(swift build -c release --show-bin-path)/appcheck-gateway" /out/appcheck-gateway

FROM debian:bookworm-slim
# Runtime libraries only: OpenSSL, nghttp2, SQLite, CA certificates (for the Firebase key set over HTTPS).
RUN apt-get update \
 && apt-get install -y --no-install-recommends libssl3 libnghttp2-14 libsqlite3-0 ca-certificates tzdata \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/appcheck-gateway --create-home appcheck \
 && mkdir -p /etc/appcheck-gateway \
 && chown appcheck /var/lib/appcheck-gateway
COPY --from=build /out/appcheck-gateway /usr/local/bin/appcheck-gateway
COPY Config/gateway.example.yaml /etc/appcheck-gateway/gateway.yaml
ENV APPCHECK_GATEWAY_CONFIG=/etc/appcheck-gateway/gateway.yaml
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
