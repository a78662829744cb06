package imagebuild_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing/fstest"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
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

// Checkout clones what a revision builds, without building it (here from
// a local repository, which Options.AllowLocalRepositories allows).
func ExampleBuilder_Checkout() {
	tmp, err := os.MkdirTemp("", "example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	// A repository with one commit.
	repoDir := filepath.Join(tmp, "agent")
	repo, err := git.PlainInit(repoDir, false)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repoDir, "langgraph.json"), []byte(`{"graphs": {"a": "./a.ts:graph"}}`), 0o644); err != nil {
		log.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		log.Fatal(err)
	}
	if _, err := wt.Add("langgraph.json"); err != nil {
		log.Fatal(err)
	}
	commit, err := wt.Commit("first", &git.CommitOptions{Author: &object.Signature{Name: "me", Email: "me@example.com"}})
	if err != nil {
		log.Fatal(err)
	}

	b, err := imagebuild.New(nil, &imagebuild.Options{AllowLocalRepositories: true})
	if err != nil {
		log.Fatal(err)
	}
	w := &controlplane.Work{Tenant: "tenant-1",
		Deployment: controlplane.Deployment{Source: controlplane.SourceGitHub, SourceConfig: controlplane.SourceConfig{RepoURL: &repoDir}}}
	out := filepath.Join(tmp, "checkout")
	sha, err := b.Checkout(context.Background(), w, out, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sha == commit.String())
	data, err := os.ReadFile(filepath.Join(out, "langgraph.json"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(data))
	// Output:
	// true
	// {"graphs": {"a": "./a.ts:graph"}}
}
