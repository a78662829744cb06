package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/deployplane/deployplane/controlplane"
)

// The browser tests drive a real Chromium (Debian's chromium; .ci/run
// installs it) with chromedp against a real server. They read:
//
//	DEPLOYPLANE_TEST_CHROMIUM      the browser (default: chromium on PATH, /usr/bin/chromium)
//	DEPLOYPLANE_TEST_AXE           axe.min.js of axe-core (npm); without it the accessibility check is skipped
//	DEPLOYPLANE_TEST_ARTIFACTS     where screenshots go (default: a temporary directory)
const (
	envChromium  = "DEPLOYPLANE_TEST_CHROMIUM"
	envAxe       = "DEPLOYPLANE_TEST_AXE"
	envArtifacts = "DEPLOYPLANE_TEST_ARTIFACTS"
)

// findChromium returns the browser's path, or skips the test saying why.
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(envChromium); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	t.Skipf("no Chromium: install Debian's chromium (apt-get install chromium; .ci/run does) or set %s", envChromium)
	return ""
}

// ui drives one browser tab.
type ui struct {
	t         *testing.T
	ctx       context.Context
	base      string
	axe       string // axe.min.js, "" to skip
	artifacts string
}

func newUI(t *testing.T, base string) *ui {
	chromium := findChromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	// The first Run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", chromium, err)
	}
	tctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	t.Cleanup(cancel)
	u := &ui{t: t, ctx: tctx, base: base}
	if p := os.Getenv(envAxe); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("%s: %v", envAxe, err)
		}
		u.axe = string(b)
	} else {
		t.Logf("%s is not set: the accessibility checks (axe-core) are skipped; .ci/run installs axe-core from npm and sets it", envAxe)
	}
	u.artifacts = os.Getenv(envArtifacts)
	if u.artifacts == "" {
		u.artifacts = filepath.Join(t.TempDir(), "screenshots")
	}
	if err := os.MkdirAll(u.artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", u.artifacts)
	return u
}

// do runs actions, failing the test on an error.
func (u *ui) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	u.t.Helper()
	if err := chromedp.Do(u.ctx, actions...); err != nil {
		loc, _ := chromedp.Run(u.ctx, chromedp.Location())
		body, _ := chromedp.Run(u.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		u.t.Fatalf("%s: %v (at %s)\n%s", what, err, loc, body)
	}
}

// eval evaluates a JavaScript expression.
func eval[T any](u *ui, expr string) T {
	u.t.Helper()
	v, err := chromedp.Run(u.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		u.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// js quotes s for JavaScript.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// until waits for a JavaScript condition, for a generous time. A poll
// cut short by a navigation (a form posted, a redirect) starts again in
// the new page.
func (u *ui) until(what, cond string) {
	u.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, err := chromedp.Run(u.ctx, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(time.Until(deadline)),
			chromedp.WithPollingInterval(50*time.Millisecond)))
		if err == nil {
			return
		}
		if u.ctx.Err() != nil || time.Now().After(deadline) {
			loc, _ := chromedp.Run(u.ctx, chromedp.Location())
			body, _ := chromedp.Run(u.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
			u.t.Fatalf("waiting for %s: %v (at %s)\n%s", what, err, loc, body)
		}
		// The page changed under the poll: wait until the new one answers.
		_ = chromedp.Do(u.ctx, chromedp.WaitReady(chromedp.CSS("body")))
	}
}

// open navigates to a path of the server.
func (u *ui) open(path string) {
	u.t.Helper()
	u.do("opening "+path, chromedp.Navigate(u.base+path), chromedp.WaitReady(chromedp.CSS("footer")))
}

// violation is an axe-core violation.
type violation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// axeResult is what the check keeps of axe.run's answer.
type axeResult struct {
	Passes     int         `json:"passes"`
	Violations []violation `json:"violations"`
}

// check runs axe-core in the page (no serious or critical violation), then
// checks that the page fits 390 px without horizontal scrolling, and
// writes screenshots at both widths.
func (u *ui) check(name string) {
	u.t.Helper()
	if u.axe != "" {
		if _, err := chromedp.Run(u.ctx, chromedp.Evaluate[chromedp.Void](u.axe)); err != nil {
			u.t.Fatalf("%s: loading axe-core: %v", name, err)
		}
		res, err := chromedp.Run(u.ctx, chromedp.Evaluate[axeResult](`axe.run(document, {resultTypes: ["violations"]}).then(function (r) {
			return {passes: r.passes.length, violations: r.violations.filter(function (v) { return v.impact === "serious" || v.impact === "critical"; }).map(function (v) {
				return {id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 5).map(function (n) { return n.target.join(" "); })};
			})};
		})`, chromedp.EvalAwaitPromise))
		if err != nil {
			u.t.Fatalf("%s: running axe-core: %v", name, err)
		}
		if res.Passes == 0 {
			u.t.Errorf("%s: axe-core checked no rule", name)
		}
		for _, v := range res.Violations {
			u.t.Errorf("%s: accessibility (%s) %s: %s at %v", name, v.Impact, v.ID, v.Help, v.Nodes)
		}
		u.t.Logf("%s: axe-core: %d rules passed, no serious or critical violation", name, res.Passes)
	}
	u.shot(name + "-desktop")
	u.do(name+" at 390 px", chromedp.EmulateViewport(390, 844))
	fits := eval[bool](u, `document.documentElement.scrollWidth <= document.documentElement.clientWidth`)
	if !fits {
		w := eval[string](u, `document.documentElement.scrollWidth + " > " + document.documentElement.clientWidth + ": " +
			Array.from(document.querySelectorAll("body *")).filter(function (e) { return e.getBoundingClientRect().right > document.documentElement.clientWidth + 1; }).slice(0, 5).map(function (e) { return e.tagName + "." + e.className; }).join(", ")`)
		u.t.Errorf("%s: overflows horizontally at 390 px: %s", name, w)
	}
	u.shot(name + "-390")
	u.do(name+" back to 1280 px", chromedp.EmulateViewport(1280, 900))
}

// shot writes a full-page screenshot.
func (u *ui) shot(name string) {
	u.t.Helper()
	png, err := chromedp.Run(u.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		u.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(u.artifacts, name+".png"), png, 0o644); err != nil {
		u.t.Fatal(err)
	}
}

func TestBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("the browser test is not short")
	}
	e := newEnv(t, &envOptions{step: 100 * time.Millisecond, paused: true})
	u := newUI(t, e.srv.URL)
	ctx := context.Background()
	if _, err := e.cp.CreateListener(ctx, tenantA, &controlplane.CreateListenerRequest{ComputeType: new("k8s"),
		ComputeID: new("cluster-1"), ComputeConfig: &controlplane.ComputeConfig{K8sNamespaces: []string{"agents"}}}); err != nil {
		t.Fatal(err)
	}

	// Signing in: a wrong key is refused.
	u.open("/ui/deployments")
	u.until("the sign-in page", `location.pathname === "/ui/signin" && !!document.getElementById("api_key")`)
	u.check("signin")
	u.do("a wrong key", chromedp.SendKeys(chromedp.ID("api_key"), "dp_wrong_key"), chromedp.Click(chromedp.CSS(`main button[type=submit]`)))
	u.until("the refusal", `document.body.innerText.indexOf("This API key is not valid.") >= 0`)
	u.do("the right key", chromedp.SendKeys(chromedp.ID("api_key"), keyA), chromedp.Click(chromedp.CSS(`main button[type=submit]`)))
	u.until("the deployments page", `location.pathname === "/ui/deployments" && !!document.querySelector("h1")`)

	// Create a deployment.
	u.do("the create page", chromedp.Click(chromedp.CSS(`a[href="/ui/deployments/new"]`)))
	u.until("the create form", `!!document.getElementById("create-form")`)
	u.check("new")
	u.do("filling the form",
		chromedp.SendKeys(chromedp.ID("name"), "browser-agent"),
		chromedp.SendKeys(chromedp.ID("display_name"), "Browser <b>agent</b>"),
		chromedp.SendKeys(chromedp.ID("image_uri"), "docker.io/acme/agent:1"),
		chromedp.SendKeys(chromedp.ID("secret_name_0"), "API_TOKEN"),
		chromedp.SendKeys(chromedp.ID("secret_value_0"), "BROWSER-SECRET-VALUE"),
		chromedp.SendKeys(chromedp.ID("spec-cpu"), "0.5"),
		chromedp.Click(chromedp.CSS(`#create-form button[type=submit]`)))
	u.until("the deployment page", `/^\/ui\/deployments\/[0-9a-f-]{36}$/.test(location.pathname) && document.body.getAttribute("data-live-open") === "true"`)
	id := strings.TrimPrefix(eval[string](u, `location.pathname`), "/ui/deployments/")
	rev := eval[string](u, `document.querySelector("#revisions [data-rev-status]").getAttribute("data-rev-status")`)
	if s := eval[string](u, `document.querySelector("#revisions [data-rev-status]").textContent`); s != "CREATING" {
		t.Fatalf("the new revision is %s before the deployer runs", s)
	}
	if strings.Contains(eval[string](u, `document.documentElement.outerHTML`), "BROWSER-SECRET-VALUE") {
		t.Fatal("the secret value is in the page")
	}

	// The revision reaches DEPLOYED without a reload.
	eval[bool](u, `window.__noReload = true`)
	e.start()
	u.until("DEPLOYED and READY without a reload", fmt.Sprintf(`window.__noReload === true &&
		document.querySelector('[data-rev-status=%s]').textContent === "DEPLOYED" &&
		document.querySelector('.titlebar [data-dep-status]').textContent === "READY" &&
		document.querySelector('[data-dep-active] code') !== null`, js(rev)))
	u.check("deployment")
	// The README's picture: the deployment page, one screen.
	if png, err := chromedp.Run(u.ctx, chromedp.CaptureScreenshot()); err == nil {
		_ = os.WriteFile(filepath.Join(u.artifacts, "readme-deployment.png"), png, 0o644)
	}

	// Its logs: lines arrive while the page is open.
	u.do("the revision page", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#revisions a[href$="/revisions/%s"]`, rev))))
	u.until("the log following", `!!document.getElementById("log") && document.body.getAttribute("data-live-open") === "true"`)
	u.until("the simulated deployer's lines", `document.querySelectorAll("#log li").length >= 3`)
	eval[bool](u, `window.__noReload = true`)
	for i := range 3 {
		level := controlplane.LogLevel("INFO")
		if i == 1 {
			level = "ERROR"
		}
		if err := e.cp.AppendLogs(ctx, tenantA, id, rev, controlplane.LogLine{Type: controlplane.LogDeploy, Level: level,
			Message: fmt.Sprintf("browser line %d <b>not bold</b>", i)}); err != nil {
			t.Fatal(err)
		}
		u.until(fmt.Sprintf("log line %d", i), fmt.Sprintf(`window.__noReload === true &&
			document.getElementById("log").textContent.indexOf(%s) >= 0`, js(fmt.Sprintf("browser line %d <b>not bold</b>", i))))
	}
	if n := eval[int](u, `document.querySelectorAll("#log b").length`); n != 0 {
		t.Fatalf("a log line became markup (%d <b>)", n)
	}
	u.until("the jump to the first error", `!document.getElementById("first-error").hidden`)
	u.check("revision")
	// The level filter and the search.
	u.do("filtering ERROR", chromedp.SetValue(chromedp.ID("level"), "ERROR"), chromedp.Click(chromedp.CSS(`form[role=search] button`)))
	u.until("ERROR lines only", `location.search.indexOf("level=ERROR") >= 0 && document.querySelectorAll("#log li").length === 1`)
	u.open(fmt.Sprintf("/ui/deployments/%s/revisions/%s?log=deploy&q=%s", id, rev, "line+2"))
	u.until("the search", `document.querySelectorAll("#log li").length === 1 && document.getElementById("log").textContent.indexOf("browser line 2") >= 0`)

	// Redeploy: a new revision, which reaches DEPLOYED live.
	u.open("/ui/deployments/" + id)
	u.do("redeploy", chromedp.Click(chromedp.CSS(fmt.Sprintf(`form[action$="/revisions/%s/redeploy"] button`, rev))))
	u.until("the second revision", `document.querySelectorAll("#revisions tbody tr").length === 2 && document.body.getAttribute("data-live-open") === "true"`)
	rev2 := eval[string](u, `document.querySelector("#revisions [data-rev-status]").getAttribute("data-rev-status")`)
	if rev2 == rev {
		t.Fatal("no new revision")
	}
	waitFor(t, "the deployer to deploy the second revision", func() bool {
		r, err := e.cp.GetRevision(ctx, tenantA, id, rev2)
		return err == nil && r.Status == controlplane.RevisionDeployed
	})
	u.until("the second revision DEPLOYED", fmt.Sprintf(`document.querySelector('[data-rev-status=%s]').textContent === "DEPLOYED"`, js(rev2)))

	// The listeners page.
	u.open("/ui/listeners")
	u.until("the listener", `document.body.innerText.indexOf("cluster-1") >= 0`)
	u.check("listeners")
	u.open("/ui/deployments")
	u.until("the list", `!!document.getElementById("deployments") && document.body.getAttribute("data-live-open") === "true"`)
	u.check("deployments")
	// A deployment created elsewhere (the API) is announced on the open
	// list, without a reload, with a link that reloads it.
	eval[bool](u, `window.__noReload = true`)
	if _, err := e.cp.CreateDeployment(ctx, tenantA, &controlplane.CreateDeploymentRequest{Name: new("api-agent"),
		Source: new(controlplane.SourceExternalDocker), SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("docker.io/acme/api:1")}}); err != nil {
		t.Fatal(err)
	}
	u.until("the new deployment's notice", `window.__noReload === true && !document.getElementById("new-deployment").hidden`)
	u.do("reloading the list", chromedp.Click(chromedp.ID("new-deployment-link")))
	u.until("the new deployment in the list", `document.getElementById("deployments").textContent.indexOf("api-agent") >= 0 && document.getElementById("new-deployment").hidden`)

	// A forged form (no CSRF token) is refused and changes nothing.
	u.open("/ui/deployments/" + id)
	eval[bool](u, fmt.Sprintf(`(function () {
		var f = document.createElement("form");
		f.method = "post";
		f.action = "/ui/deployments/%s/delete";
		var i = document.createElement("input");
		i.name = "confirm"; i.value = "browser-agent";
		f.appendChild(i);
		document.body.appendChild(f);
		f.submit();
		return true;
	})()`, id))
	u.until("the refusal", `document.body.innerText.indexOf("did not come from this dashboard") >= 0`)
	if d, err := e.cp.GetDeployment(ctx, tenantA, id); err != nil || d.Status == controlplane.StatusAwaitingDelete {
		t.Fatalf("the forged form deleted the deployment (%v)", err)
	}
	u.check("error")

	// Delete, with the name typed; the page sees it go.
	// (The loop waits until the page follows the deployment, so that the
	// removal happens while the page is open.)
	e.pause()
	u.open("/ui/deployments/" + id)
	eval[bool](u, `window.__before = true`)
	u.do("delete", chromedp.SendKeys(chromedp.ID("confirm"), "browser-agent"), chromedp.Click(chromedp.CSS(`#form-delete button`)))
	u.until("the deployment page after the deletion", `window.__before === undefined && document.body.getAttribute("data-live-open") === "true" &&
		document.querySelector(".titlebar [data-dep-status]").textContent === "AWAITING_DELETE"`)
	eval[bool](u, `window.__noReload = true`)
	e.start()
	u.until("the deployment removed, live", `window.__noReload === true && !document.getElementById("deleted-notice").hidden`)

	// A key of two workspaces chooses one.
	u.do("sign out", chromedp.Click(chromedp.CSS(`form[action="/ui/signout"] button`)))
	u.until("the sign-in page", `location.pathname === "/ui/signin"`)
	u.do("a key of two workspaces", chromedp.SendKeys(chromedp.ID("api_key"), keyAB), chromedp.Click(chromedp.CSS(`main button[type=submit]`)))
	u.until("the workspace page", `location.pathname === "/ui/workspace"`)
	u.check("workspace")
	u.do("choose", chromedp.Click(chromedp.ID("tenant-1")), chromedp.Click(chromedp.CSS(`main button[type=submit]`)))
	u.until("the deployments of the second workspace", fmt.Sprintf(`location.pathname === "/ui/deployments" && document.body.innerText.indexOf(%s) >= 0`, js(tenantB)))
}
