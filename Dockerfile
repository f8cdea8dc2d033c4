# Builds the manager image: a static binary on distroless, running as non-root.
FROM golang:1.26 AS build
ENV GOTOOLCHAIN=go1.27.3 CGO_ENABLED=0
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go build -trimpath -ldflags "-s -w" -o /poolsmith .

FROM gcr.io/distroless/static:nonroot
COPY --from=build /poolsmith /poolsmith
USER 65532:65532
ENTRYPOINT ["/poolsmith"]
