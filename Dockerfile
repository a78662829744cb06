# The image of the deployplane server: its static binary, the CA
# certificates, and a data directory and /tmp of its own, on scratch, run as
# uid 65532.
#
#   docker build -t deployplane .
#   docker run -p 8124:8124 -v deployplane-data:/data deployplane
#
# Offline, with no image or module to download: GO_IMAGE names a local image
# with a Go toolchain (go on its PATH; no shell needed), and the modules come
# from a vendor/ directory in the context:
#
#   go mod vendor
#   docker build --build-arg GO_IMAGE=my-go --build-arg GOFLAGS=-mod=vendor -t deployplane .
#
# The image carries every cloud storage driver (-blob-url s3://, gs://,
# azblob://, -registry-storage s3://), built in with the tags of TAGS; an
# image without them (smaller, and quicker to build):
#
#   docker build --build-arg TAGS= -t deployplane .
#
# docs/operating.md ("The container image", "Build tags") says more.

ARG GO_IMAGE=golang:1.26-bookworm

FROM ${GO_IMAGE} AS build
# The environment of the go command: GOFLAGS=-mod=vendor builds from vendor/.
# TAGS are the build tags, the storage drivers' by default; RUN's exec form
# expands no variable, so they reach go build through GOFLAGS.
ARG GOFLAGS CGO_ENABLED=0 TAGS=s3,gcs,azure
ENV GOFLAGS="-tags=${TAGS} ${GOFLAGS}"
# An empty directory, copied below as /data and /tmp with their owner.
WORKDIR /out/empty
WORKDIR /src
COPY . .
# Exec form: GO_IMAGE needs no shell.
RUN ["go", "build", "-trimpath", "-ldflags=-s -w", "-o", "/out/deployplane", "./cmd/deployplane"]

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build --chown=65532:65532 /out/empty /data
# Where builds clone and unpack sources, and -db :memory: keeps uploads.
COPY --from=build --chown=65532:65532 /out/empty /tmp
COPY --from=build /out/deployplane /deployplane
USER 65532:65532
# The server's relative defaults (-db ./deployplane.db, the secret key and
# uploads beside it, the registry's storage) land in /data.
WORKDIR /data
EXPOSE 8124
# Flags given to docker run follow these; a flag given again wins.
ENTRYPOINT ["/deployplane", "-addr", "0.0.0.0:8124"]
