# syntax=docker/dockerfile:1
# irisgate in a small image: a static binary (CGO off; modernc.org/sqlite is
# pure Go) on Alpine. Alpine rather than distroless/scratch because the
# agent's terminal tool runs `bash -c`, and a gateway whose agent cannot run a
# command would be a surprise; bash, CA certificates (model APIs, FCM) and time
# zones (cron) add about 5 MB.
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
RUN apk add --no-cache bash ca-certificates tzdata \
 && addgroup -S -g 10001 irisgate \
 && adduser -S -D -H -u 10001 -G irisgate irisgate \
 && mkdir -p /data /workspace \
 && chown irisgate:irisgate /data /workspace
COPY --from=build /out/irisgate /usr/local/bin/irisgate
USER irisgate
# The data (SQLite database, media, VAPID keys) lives in a volume; the agent's
# tools work in /workspace (mount a project there). IRISGATE_CLI is how the
# banner tells you to run irisgate's commands from outside the container.
ENV IRISGATE_DATA=/data \
    IRISGATE_LISTEN=:8787 \
    IRISGATE_WORKDIR=/workspace \
    IRISGATE_CLI="docker exec -it irisgate irisgate"
VOLUME ["/data"]
WORKDIR /workspace
EXPOSE 8787
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s \
  CMD wget -q -O /dev/null http://127.0.0.1:8787/healthz || exit 1
# SIGTERM is what `docker stop` sends: replies in progress end with their
# text kept and devices are told the gateway is restarting.
STOPSIGNAL SIGTERM
ENTRYPOINT ["irisgate"]
CMD ["serve"]
