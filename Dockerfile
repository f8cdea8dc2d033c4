# Builds the manager image: a static binary on distroless, running as non-root (the
# chart's and config/manager's runAsUser 65532). `make docker-build` tags it with the
# chart's appVersion. Both base images are pinned by tag (test/chart checks it, and that
# the builder is the Makefile's Go toolchain); pin by digest too if your policy asks.
FROM golang:1.27.3-bookworm AS build
ENV GOTOOLCHAIN=local CGO_ENABLED=0
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go build -trimpath -ldflags "-s -w" -o /poolsmith .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /poolsmith /poolsmith
USER 65532:65532
ENTRYPOINT ["/poolsmith"]
