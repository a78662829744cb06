package imagebuild_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"testing/fstest"

	"github.com/moby/moby/client"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/imagebuild"
)

// A project without a Dockerfile gets the one `langgraph dockerfile`
// writes.
func ExampleGenerateDockerfile() {
	repo := fstest.MapFS{
		"langgraph.json": {Data: []byte(`{"node_version": "20", "graphs": {"agent": "./src/agent.ts:graph"}}`)},
		"src/agent.ts":   {},
		"yarn.lock":      {},
	}
	df, err := imagebuild.GenerateDockerfile(repo, "my-agent", "langgraph.json", &imagebuild.DockerfileOptions{
		BaseImage: "registry.example/langgraphjs-api"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("context:", df.Context)
	for l := range strings.SplitSeq(df.Text, "\n") {
		if l != "" {
			fmt.Println(l)
		}
	}
	// Output:
	// context: .
	// FROM registry.example/langgraphjs-api:20
	// ADD . /deps/my-agent
	// WORKDIR /deps/my-agent
	// RUN yarn install --frozen-lockfile
	// ENV LANGSERVE_GRAPHS='{"agent": "./src/agent.ts:graph"}'
	// WORKDIR /deps/my-agent
	// RUN (test ! -f /api/langgraph_api/js/build.mts && echo "Prebuild script not found, skipping") || tsx /api/langgraph_api/js/build.mts
}

// A deployer builds a github revision, then runs the image.
func ExampleBuilder_Build() {
	docker, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		log.Fatal(err)
	}
	b, err := imagebuild.New(docker, &imagebuild.Options{BaseImage: "langchain/langgraph-api"})
	if err != nil {
		log.Fatal(err)
	}
	url, ref := "https://github.com/langchain-ai/new-langgraph-project", "main"
	w := &controlplane.Work{Tenant: "tenant-1",
		Deployment: controlplane.Deployment{ID: "0190f0a0-0000-7000-8000-000000000001", Source: controlplane.SourceGitHub,
			SourceConfig: controlplane.SourceConfig{RepoURL: &url}},
		Revision: controlplane.Revision{ID: "0190f0a0-0000-7000-8000-0000000000aa",
			SourceRevisionConfig: controlplane.SourceRevisionConfig{RepoRef: &ref}}}
	image, sha, err := b.Build(context.Background(), w, func(line string) { fmt.Println(line) })
	if err != nil {
		// The deployer reports BUILD_FAILED with err's text.
		fmt.Println("status_message:", err)
		return
	}
	fmt.Println(image, "built from", sha)
}
