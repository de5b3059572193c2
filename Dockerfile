# syntax=docker/dockerfile:1.7
# wagate container image: `wagate` (API node, ROLE=all|api) and `wagate-worker` (ROLE=worker) on Debian slim,
# running as a non-root user with DATA_DIR on a volume. The browser engine (ENGINE_TYPE=browser, the default)
# is in by default: Debian's chromium, and the pinned @wppconnect/wa-js bundle at
# /usr/share/wagate/wa-js/wppconnect-wa.js, where BROWSER_WAJS_PATH looks when unset. An image for the sim and
# socket engines only can leave Chromium out (--build-arg WITH_CHROMIUM=false, about 300 MB smaller).
#
#   docker build -t wagate:dev .
#   docker build --build-arg WITH_CHROMIUM=false -t wagate:dev-socket .
#   docker run --rm -p 2785:2785 -v wagate-data:/data -e ENGINE_TYPE=sim wagate:dev

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=trixie
ARG NODE_VERSION=22

# The wa-js bundle, installed from the lock file the tests use (scripts/lib.sh `ensure_wajs`): same pin,
# same bytes. Only the one file it builds is copied into the runtime image.
FROM node:${NODE_VERSION}-${DEBIAN_RELEASE}-slim AS wajs
WORKDIR /wajs
COPY node/engine-browser/js/package.json node/engine-browser/js/package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts

FROM rust:${RUST_VERSION}-slim-${DEBIAN_RELEASE} AS build
WORKDIR /src
# Manifests and sources only (.dockerignore keeps target/, data and deployment files out of the context).
COPY Cargo.toml Cargo.lock ./
# The bundled SQLite's compile options (LIBSQLITE3_FLAGS) live here.
COPY .cargo .cargo
COPY proto proto
COPY config config
COPY node node
COPY db db
COPY queue-workers queue-workers
COPY loadtest loadtest
COPY migrations migrations
# The cache mounts keep the registry and the build directory between builds; the binaries are copied out
# of the cached target/ because a cache mount is not part of the layer.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p wagate-node -p wagate-workers --bins \
    && install -D -m 0755 target/release/wagate /out/wagate \
    && install -D -m 0755 target/release/wagate-worker /out/wagate-worker

FROM debian:${DEBIAN_RELEASE}-slim AS runtime
ARG WITH_CHROMIUM=true
# Unpinned on purpose: the slim base moves with Debian's security updates, and pins would fail once the
# archive drops a version. tini is PID 1 so SIGTERM reaches wagate and ffmpeg/Chromium children are reaped;
# curl serves the HEALTHCHECK.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl ffmpeg tini \
    && if [ "$WITH_CHROMIUM" = "true" ]; then \
         apt-get install -y --no-install-recommends chromium fonts-liberation; \
       fi \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 wagate \
    && useradd --system --uid 10001 --gid wagate --home-dir /data --shell /usr/sbin/nologin wagate \
    && install -d -o wagate -g wagate -m 0750 /data

COPY --from=build /out/wagate /out/wagate-worker /usr/local/bin/
COPY --from=wajs /wajs/node_modules/@wppconnect/wa-js/dist/wppconnect-wa.js /usr/share/wagate/wa-js/wppconnect-wa.js

ENV DATA_DIR=/data \
    BIND_HOST=0.0.0.0 \
    API_PORT=2785 \
    LOG_FORMAT=json \
    HOME=/data
VOLUME ["/data"]
EXPOSE 2785
USER 10001:10001
WORKDIR /data

# Through sh so a changed API_PORT is followed.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
    CMD ["/bin/sh", "-c", "curl -fsS -o /dev/null http://127.0.0.1:${API_PORT}/api/health/live || exit 1"]

# Exec form: tini, then wagate, receive the signals. The worker image is the same with
# `command: ["/usr/bin/tini", "--", "/usr/local/bin/wagate-worker"]`.
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/wagate"]
