package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"

	"github.com/deployplane/deployplane/apierr"
	cp "github.com/deployplane/deployplane/controlplane"
)

// maxSecretRows is the most secret rows a form sends.
const maxSecretRows = 200

// newSecretRows is the number of empty secret rows the forms offer.
const newSecretRows = 3

// createFields maps the names in a create's 422 locs to the form's fields.
var createFields = map[string]string{
	"name": "name", "display_name": "display_name", "source": "source", "image_uri": "image_uri",
	"deployment_type": "deployment_type", "listener_id": "listener_id", "listener_config": "k8s_namespace",
	"k8s_namespace": "k8s_namespace", "secrets": "secrets", "resource_spec": "resource_spec",
	"min_scale": "min_scale", "max_scale": "max_scale", "cpu": "cpu", "cpu_limit": "cpu_limit",
	"memory_mb": "memory_mb", "memory_limit_mb": "memory_limit_mb",
}

// newData is the create page's.
type newData struct {
	Sources    []cp.Source
	Types      []cp.DeploymentType
	Listeners  []cp.Listener
	SecretRows []secretRow
	SpecFields []string
}

// secretRow is one row of a secrets form: a name and (never shown) value.
type secretRow struct {
	Index int
	Name  string
	Orig  string // the stored name the row edits ("" for a new row)
}

// newDeploymentPage serves GET /ui/deployments/new.
func (h *Handler) newDeploymentPage(q *request) error {
	return h.showNew(q, http.StatusOK, &form{Values: url.Values{}, Action: "create"})
}

func (h *Handler) showNew(q *request, status int, f *form) error {
	ls, err := h.cp.ListListeners(q.r.Context(), q.tenant(), &cp.ListListenersQuery{Limit: new(cp.MaxPageLimit)})
	if err != nil {
		return err
	}
	d := newData{Sources: h.sources, Listeners: ls.Resources, SpecFields: editableSpec,
		Types: []cp.DeploymentType{cp.DeploymentTypeDev, cp.DeploymentTypeDevFree, cp.DeploymentTypeProd}}
	// The rows keep the names typed; values are never sent back.
	for i := range rowCount(f.Values) {
		d.SecretRows = append(d.SecretRows, secretRow{Index: i, Name: f.Values.Get(fmt.Sprintf("secret_name_%d", i))})
	}
	for range newSecretRows {
		d.SecretRows = append(d.SecretRows, secretRow{Index: len(d.SecretRows)})
	}
	h.render(q.w, status, "new", &view{Title: "New deployment", Sess: q.sess, Nav: "deployments", Data: d, Form: f})
	return nil
}

// rowCount is the number of secret rows a form sent (at most
// maxSecretRows), those with a name only.
func rowCount(v url.Values) int {
	n := 0
	for i := range maxSecretRows {
		if strings.TrimSpace(v.Get(fmt.Sprintf("secret_name_%d", i))) != "" {
			n = i + 1
		}
	}
	return n
}

// optString is s, or nil when s is blank.
func optString(s string) *string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	return &s
}

// readSpec reads the editable resource spec fields of a form into spec.
func readSpec(v url.Values, spec *cp.ResourceSpec, f *form) {
	ints := map[string]**int64{"min_scale": &spec.MinScale, "max_scale": &spec.MaxScale,
		"memory_mb": &spec.MemoryMB, "memory_limit_mb": &spec.MemoryLimitMB}
	floats := map[string]**float64{"cpu": &spec.CPU, "cpu_limit": &spec.CPULimit}
	for k, p := range ints {
		s := strings.TrimSpace(v.Get(k))
		if s == "" {
			*p = nil
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			f.add(k, "Enter a whole number.")
			continue
		}
		*p = &n
	}
	for k, p := range floats {
		s := strings.TrimSpace(v.Get(k))
		if s == "" {
			*p = nil
			continue
		}
		n, err := strconv.ParseFloat(s, 64)
		if err != nil {
			f.add(k, "Enter a number, such as 0.5.")
			continue
		}
		*p = &n
	}
}

// createDeployment serves POST /ui/deployments/new: ControlPlane's
// CreateDeployment, as POST /v2/deployments.
func (h *Handler) createDeployment(q *request) error {
	v := q.r.PostForm
	f := &form{Values: v, Action: "create"}
	src := cp.Source(v.Get("source"))
	req := &cp.CreateDeploymentRequest{Name: optString(v.Get("name")), DisplayName: optString(v.Get("display_name")), Source: &src,
		SourceConfig: &cp.SourceConfig{}, SourceRevisionConfig: &cp.SourceRevisionConfig{ImageURI: optString(v.Get("image_uri"))}}
	if v.Get("source") == "" {
		req.Source = nil
	}
	if t := v.Get("deployment_type"); t != "" {
		dt := cp.DeploymentType(t)
		req.SourceConfig.DeploymentType = &dt
	}
	if l := optString(v.Get("listener_id")); l != nil {
		req.SourceConfig.ListenerID = l
		if ns := optString(v.Get("k8s_namespace")); ns != nil {
			req.SourceConfig.ListenerConfig = &cp.ListenerConfig{K8sNamespace: ns}
		}
	}
	var spec cp.ResourceSpec
	readSpec(v, &spec, f)
	if !reflect.ValueOf(spec).IsZero() {
		req.SourceConfig.ResourceSpec = &spec
	}
	for i := range rowCount(v) {
		name := strings.TrimSpace(v.Get(fmt.Sprintf("secret_name_%d", i)))
		if name == "" {
			continue
		}
		val := v.Get(fmt.Sprintf("secret_value_%d", i))
		req.Secrets = append(req.Secrets, cp.SecretInput{Name: name, Value: &val})
	}
	if f.failed() {
		return h.showNew(q, http.StatusUnprocessableEntity, f)
	}
	dep, err := h.cp.CreateDeployment(q.r.Context(), q.tenant(), req)
	if ok, err := h.problems(err, f, createFields); ok {
		return h.showNew(q, http.StatusUnprocessableEntity, f)
	} else if err != nil {
		return err
	}
	h.toDeployment(q, dep.ID)
	return nil
}

// problems puts a 422's problems (and a conflict's detail, beside the
// name) into f, reporting whether err was one of them.
func (h *Handler) problems(err error, f *form, fields map[string]string) (bool, error) {
	var ve *apierr.ValidationError
	switch {
	case err == nil:
		return false, nil
	case errors.As(err, &ve):
		f.fromValidation(ve, fields)
		return true, nil
	case errors.Is(err, apierr.ErrConflict):
		var de *apierr.DetailError
		msg := err.Error()
		if errors.As(err, &de) {
			msg = de.Detail
		}
		f.add(fields["name"], msg)
		return true, nil
	}
	return false, err
}

// toDeployment redirects to a deployment's page.
func (h *Handler) toDeployment(q *request, id string) {
	http.Redirect(q.w, q.r, h.base+"/deployments/"+url.PathEscape(id), http.StatusSeeOther)
}

// update applies one PATCH of the deployment page's forms: on a 422 the
// page is shown again with the problems beside the form's fields.
func (h *Handler) update(q *request, action string, req *cp.UpdateDeploymentRequest, fields map[string]string, f *form) error {
	id := q.r.PathValue("id")
	if f == nil {
		f = &form{Values: q.r.PostForm, Action: action}
	}
	if !f.failed() {
		_, err := h.cp.UpdateDeployment(q.r.Context(), q.tenant(), id, req)
		ok, err := h.problems(err, f, fields)
		if err != nil {
			return err
		}
		if !ok {
			h.toDeployment(q, id)
			return nil
		}
	}
	return h.showDeployment(q, http.StatusUnprocessableEntity, f)
}

// changeImage serves POST /ui/deployments/{id}/image: a new revision of
// the image.
func (h *Handler) changeImage(q *request) error {
	req := &cp.UpdateDeploymentRequest{SourceRevisionConfig: &cp.SourceRevisionConfig{ImageURI: optString(q.r.PostForm.Get("image_uri"))}}
	f := &form{Values: q.r.PostForm, Action: "image"}
	if req.SourceRevisionConfig.ImageURI == nil {
		f.add("image_uri", "Enter an image.")
	}
	return h.update(q, "image", req, map[string]string{"image_uri": "image_uri", "source_revision_config": "image_uri"}, f)
}

// changeDisplayName serves POST /ui/deployments/{id}/display-name (in
// place, no revision).
func (h *Handler) changeDisplayName(q *request) error {
	name := q.r.PostForm.Get("display_name")
	return h.update(q, "display_name", &cp.UpdateDeploymentRequest{DisplayName: &name},
		map[string]string{"display_name": "display_name"}, nil)
}

// changeResources serves POST /ui/deployments/{id}/resources: the stored
// spec with the form's fields replaced (a new revision).
func (h *Handler) changeResources(q *request) error {
	dep, err := h.cp.GetDeployment(q.r.Context(), q.tenant(), q.r.PathValue("id"))
	if err != nil {
		return err
	}
	var spec cp.ResourceSpec
	if dep.SourceConfig.ResourceSpec != nil {
		spec = *dep.SourceConfig.ResourceSpec
	}
	f := &form{Values: q.r.PostForm, Action: "resources"}
	readSpec(q.r.PostForm, &spec, f)
	return h.update(q, "resources", &cp.UpdateDeploymentRequest{SourceConfig: &cp.SourceConfig{ResourceSpec: &spec}}, createFields, f)
}

// changeSecrets serves POST /ui/deployments/{id}/secrets: the rows as the
// new list (a new revision). A row of a stored secret whose value is left
// empty keeps the stored value, which the page never shows.
func (h *Handler) changeSecrets(q *request) error {
	v := q.r.PostForm
	dep, err := h.cp.GetDeployment(q.r.Context(), q.tenant(), q.r.PathValue("id"))
	if err != nil {
		return err
	}
	current := map[string]string{}
	for _, s := range dep.Secrets {
		current[s.Name] = s.Value
	}
	f := &form{Values: v, Action: "secrets"}
	var list []cp.SecretInput
	for i := range maxSecretRows {
		name := strings.TrimSpace(v.Get(fmt.Sprintf("secret_name_%d", i)))
		orig := v.Get(fmt.Sprintf("secret_orig_%d", i))
		val := v.Get(fmt.Sprintf("secret_value_%d", i))
		if name == "" || v.Get(fmt.Sprintf("secret_remove_%d", i)) != "" {
			continue
		}
		if old, ok := current[orig]; ok && orig != "" && val == "" {
			val = old
		}
		list = append(list, cp.SecretInput{Name: name, Value: &val})
	}
	if len(list) == 0 {
		f.add("secrets", "Keep at least one secret: an empty list changes nothing (as in the API).")
	}
	return h.update(q, "secrets", &cp.UpdateDeploymentRequest{Secrets: list}, map[string]string{"secrets": "secrets"}, f)
}

// deleteDeployment serves POST /ui/deployments/{id}/delete, once the name
// is typed to confirm: back to the deployment page while it is torn down,
// or to the list when it went at once (it never ran anywhere).
func (h *Handler) deleteDeployment(q *request) error {
	id := q.r.PathValue("id")
	dep, err := h.cp.GetDeployment(q.r.Context(), q.tenant(), id)
	if err != nil {
		return err
	}
	if q.r.PostForm.Get("confirm") != dep.Name {
		f := &form{Values: q.r.PostForm, Action: "delete"}
		f.add("confirm", "Type the deployment's name exactly to delete it.")
		return h.showDeployment(q, http.StatusUnprocessableEntity, f)
	}
	if err := h.cp.DeleteDeployment(q.r.Context(), q.tenant(), id); err != nil {
		return err
	}
	if _, err := h.cp.GetDeployment(q.r.Context(), q.tenant(), id); errors.Is(err, apierr.ErrNotFound) {
		http.Redirect(q.w, q.r, h.base+"/deployments", http.StatusSeeOther)
		return nil
	}
	h.toDeployment(q, id)
	return nil
}

// rollback serves POST /ui/deployments/{id}/revisions/{rid}/rollback.
func (h *Handler) rollback(q *request) error {
	id, rid := q.r.PathValue("id"), q.r.PathValue("rid")
	if _, err := h.cp.Rollback(q.r.Context(), q.tenant(), id, &cp.RollbackRequest{RevisionID: &rid}); err != nil {
		return err
	}
	h.toDeployment(q, id)
	return nil
}

// pin serves POST /ui/deployments/{id}/pin: pins the deployment to the
// revision the form names (its active one).
func (h *Handler) pin(q *request) error {
	id, rid := q.r.PathValue("id"), q.r.PostForm.Get("revision_id")
	if _, err := h.cp.UpdateDeployment(q.r.Context(), q.tenant(), id, &cp.UpdateDeploymentRequest{PinnedRevisionID: &rid}); err != nil {
		return err
	}
	h.toDeployment(q, id)
	return nil
}

// unpin serves POST /ui/deployments/{id}/unpin.
func (h *Handler) unpin(q *request) error {
	id := q.r.PathValue("id")
	if _, err := h.cp.UpdateDeployment(q.r.Context(), q.tenant(), id, &cp.UpdateDeploymentRequest{Remove: []string{"pinned_revision_id"}}); err != nil {
		return err
	}
	h.toDeployment(q, id)
	return nil
}

// redeploy serves POST /ui/deployments/{id}/revisions/{rid}/redeploy.
func (h *Handler) redeploy(q *request) error {
	id := q.r.PathValue("id")
	if _, err := h.cp.RedeployRevision(q.r.Context(), q.tenant(), id, q.r.PathValue("rid")); err != nil {
		return err
	}
	h.toDeployment(q, id)
	return nil
}
