# syntax=docker/dockerfile:1
# irisgate in an image: a static binary (CGO off; modernc.org/sqlite is pure
# Go) on Alpine. The binary is most of it: 56.7 MB (54 MiB) built as below,
# with -trimpath -ldflags "-s -w" (81 MB without -s -w), 14.5 MB gzipped,
# measured on linux/amd64. Alpine 3.22 itself is about 8 MB, and bash, CA
# certificates (model APIs, FCM) and time zones (cron) add about 5 MB: some
# 70 MB in all (those two figures are Alpine's, not measured: the machine
# this was written on has no Docker daemon to build the image). Alpine
# rather than distroless/scratch because the agent's terminal
# tool runs `bash -c`, and a gateway whose agent cannot run a command would
# be a surprise.
#
# The agent's sandbox here: Docker's default seccomp profile refuses the
# user namespaces the strongest wall needs, so commands run behind Landlock
# alone where the host's kernel has Landlock ABI 6 or later (Linux 6.12;
# the default profile allows the landlock system calls since Docker 23) and
# otherwise with no wall, every command that is not read-only asking first
# (and /yolo asking all the same). `docker logs` says which at start. The
# data (/data) lies outside the working directory (/workspace), which
# Landlock alone needs to keep it out.
#
#   docker build -t irisgate --build-arg VERSION=$(git describe --tags --always) .
#   docker run -d --name irisgate -p 8787:8787 -v irisgate-data:/data irisgate
#   docker logs irisgate          # the first start's token, pairing link and QR code
#   docker exec -it irisgate irisgate pair
#
# or `docker compose up -d` with compose.yaml.

FROM golang:1.26 AS build
WORKDIR /src
# Modules first: a change to the code does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=devel
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/irisgate/irisgate/internal/version.stamp=${VERSION}" \
      -o /out/irisgate ./cmd/irisgate

FROM alpine:3.22
# The user gets a home of its own (git, go and npm write there), apart from
# the data and the working directory.
RUN apk add --no-cache bash ca-certificates tzdata \
 && addgroup -S -g 10001 irisgate \
 && adduser -S -D -h /home/irisgate -s /bin/bash -u 10001 -G irisgate irisgate \
 && mkdir -p /data /workspace \
 && chown irisgate:irisgate /data /workspace /home/irisgate
COPY --from=build /out/irisgate /usr/local/bin/irisgate
USER irisgate
# The data (SQLite database, media, VAPID keys) lives in a volume; the agent's
# tools work in /workspace (mount a project there). IRISGATE_CLI is how the
# banner tells you to run irisgate's commands from outside the container.
ENV HOME=/home/irisgate \
    IRISGATE_DATA=/data \
    IRISGATE_LISTEN=:8787 \
    IRISGATE_WORKDIR=/workspace \
    IRISGATE_CLI="docker exec -it irisgate irisgate"
VOLUME ["/data"]
WORKDIR /workspace
EXPOSE 8787
# The port (and host, unless it listens on every address) of IRISGATE_LISTEN,
# as the container runs with it: `docker run -e IRISGATE_LISTEN=:9000` is
# checked on 9000.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s \
  CMD l="${IRISGATE_LISTEN:-:8787}"; h="${l%:*}"; case "$h" in ""|0.0.0.0|"[::]") h=127.0.0.1;; esac; \
      wget -q -O /dev/null "http://$h:${l##*:}/healthz" || exit 1
# SIGTERM is what `docker stop` sends: replies in progress end with their
# text kept and devices are told the gateway is restarting.
STOPSIGNAL SIGTERM
ENTRYPOINT ["irisgate"]
CMD ["serve"]
