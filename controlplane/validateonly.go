package controlplane

import (
	"context"
	"slices"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/store"
)

// Validation without writing. A front end that could not decode all of a
// request (a member of the wrong type) answers 422 without calling the
// method that writes, yet should list every problem: these methods run the
// same checks on what did decode, and write nothing. They read the store
// (the deployment or listener a PATCH applies to, the integration and
// listener a create names) in a View.

// ValidateCreateDeployment reports the problems CreateDeployment would find
// in req, as a *apierr.ValidationError, without creating anything; nil means req
// would pass validation. A taken name (apierr.ErrConflict) is not checked.
func (cp *ControlPlane) ValidateCreateDeployment(ctx context.Context, tenant string, req *CreateDeploymentRequest) error {
	if err := apierr.CheckTenant(tenant); err != nil {
		return err
	}
	if req == nil {
		req = &CreateDeploymentRequest{}
	}
	d, _, ps := cp.checkCreate(req)
	err := cp.st.View(ctx, func(r store.Reader) error {
		ps = cp.checkReferences(r, tenant, d.Source, &d.SourceConfig, ps)
		var err error
		ps, err = cp.checkUpload(r, tenant, "", d.Source, d.SourceRevisionConfig.SourceTarballPath, ps)
		return err
	})
	if err != nil {
		return cp.storeErr("validate deployment", err)
	}
	return apierr.Validation(ps...)
}

// ValidateUpdateDeployment reports the problems UpdateDeployment (and
// CreateRevision) would find in req for deployment id, as a
// *apierr.ValidationError, without changing anything. Errors as UpdateDeployment's
// (*apierr.NotFoundError, apierr.ErrInvalidState) when the deployment cannot be patched.
func (cp *ControlPlane) ValidateUpdateDeployment(ctx context.Context, tenant, id string, req *UpdateDeploymentRequest) error {
	if err := apierr.CheckTenant(tenant); err != nil {
		return err
	}
	cid, ok := pathID(id)
	if !ok {
		return &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: id}
	}
	if req == nil {
		req = &UpdateDeploymentRequest{}
	}
	p, pure, aliased := cp.checkPatch(req)
	var ps []apierr.Problem
	err := cp.st.View(ctx, func(r store.Reader) error {
		stored, err := cp.getDeployment(r, tenant, cid)
		if err != nil {
			return err
		}
		if stored.Status == StatusAwaitingDelete {
			return apierr.InvalidStatef("Deployment ID %s is being deleted.", cid)
		}
		var merged deploymentRecord
		merged, ps, _ = cp.mergeWith(stored, p, req, pure, aliased)
		if len(p.SecretReferences) > 0 {
			ps = cp.secretRefProblems(r, tenant, &merged.Deployment, ps)
		}
		ps, err = cp.checkUpload(r, tenant, cid, stored.Source, p.SourceRevisionConfig.SourceTarballPath, ps)
		return err
	})
	if err != nil {
		return cp.storeErr("validate deployment", err)
	}
	return apierr.Validation(ps...)
}

// ValidateCreateListener reports the problems CreateListener would find in
// req, as a *apierr.ValidationError, without creating anything. A taken
// compute_id (apierr.ErrConflict) is not checked.
func (cp *ControlPlane) ValidateCreateListener(ctx context.Context, tenant string, req *CreateListenerRequest) error {
	if err := apierr.CheckTenant(tenant); err != nil {
		return err
	}
	if req == nil {
		req = &CreateListenerRequest{}
	}
	return apierr.Validation(cp.checkCreateListener(req)...)
}

// ValidateUpdateListener reports the problems UpdateListener would find in
// req for listener id, as a *apierr.ValidationError, without changing anything.
// Errors as UpdateListener's (*apierr.NotFoundError).
func (cp *ControlPlane) ValidateUpdateListener(ctx context.Context, tenant, id string, req *UpdateListenerRequest) error {
	if err := apierr.CheckTenant(tenant); err != nil {
		return err
	}
	cid, ok := pathID(id)
	if !ok {
		return &apierr.NotFoundError{Kind: apierr.KindListener, ID: id}
	}
	if req == nil {
		req = &UpdateListenerRequest{}
	}
	pure := cp.checkUpdateListener(req)
	var ps []apierr.Problem
	err := cp.st.View(ctx, func(r store.Reader) error {
		l, err := getListener(r, tenant, cid)
		if err != nil {
			return err
		}
		ps = listenerImmutables(req, l, slices.Clone(pure))
		return nil
	})
	if err != nil {
		return cp.storeErr("validate listener", err)
	}
	return apierr.Validation(ps...)
}

// checkCreate is every check of CreateDeployment that needs no store: it
// returns the request as a draft deployment, its tag value ids (canonical,
// sorted, without duplicates) and the problems.
func (cp *ControlPlane) checkCreate(req *CreateDeploymentRequest) (*Deployment, []string, []apierr.Problem) {
	d, ps, aliased := draftOf(req)
	c := &checker{lim: cp.lim, sh: cp.shapes, ps: ps}
	known := knownSource(d.Source)
	switch {
	case d.Source == "":
		c.add([]any{"body", "source"}, apierr.TypeMissing, apierr.MsgFieldRequired)
	case !known:
		c.add([]any{"body", "source"}, apierr.TypeLiteralError, "Input should be 'github', 'external_docker', 'internal_source' or 'internal_docker'")
	case !cp.offered(d.Source):
		c.add([]any{"body", "source"}, apierr.TypeSourceNotOffered, "Source '"+string(d.Source)+"' is not offered by this control plane")
	}
	if known {
		c.ps = applyCreateTable(d, d.Source, c.ps, cp.hooks)
	} else if d.Name == "" {
		c.add([]any{"body", "name"}, apierr.TypeMissing, apierr.MsgFieldRequired)
	}
	c.checkDeploymentValues(d)
	d.Secrets = c.secrets([]any{"body", "secrets"}, req.Secrets)
	c.secretReferences([]any{"body", "secret_references"}, d.SecretReferences, d.Secrets)
	tags := c.tagValueIDs([]any{"body", "tag_value_ids"}, req.TagValueIDs)
	if d.Source == SourceGitHub {
		c.ps = checkTagRef(&Deployment{SourceConfig: d.SourceConfig, SourceRevisionConfig: d.SourceRevisionConfig}, c.ps, cp.hooks)
	}
	if knownSource(d.Source) {
		withDefaults := &Deployment{Source: d.Source, SourceConfig: d.SourceConfig}
		applyCreateDefaults(withDefaults, d.Source)
		c.ps = checkScaleToZero(withDefaults, c.ps)
	}
	return d, tags, aliasLocs(c.ps, aliased)
}

// checkPatch is every check of a PATCH that needs no stored deployment: it
// returns the request as a draft, the problems, and whether the client
// named the graph config path by its alias (for mergePatch).
func (cp *ControlPlane) checkPatch(req *UpdateDeploymentRequest) (*Deployment, []apierr.Problem, bool) {
	p, ps, aliased := draftOf(req)
	c := &checker{lim: cp.lim, sh: cp.shapes, ps: ps}
	if req.MergeResourceSpec {
		// The merged spec is checked whole (mergeWith): the request's
		// part of it need not be ordered on its own.
		spec := p.SourceConfig.ResourceSpec
		p.SourceConfig.ResourceSpec = nil
		c.checkDeploymentValues(p)
		p.SourceConfig.ResourceSpec = spec
	} else {
		c.checkDeploymentValues(p)
	}
	p.Secrets = c.secrets([]any{"body", "secrets"}, req.Secrets)
	c.secretReferences([]any{"body", "secret_references"}, p.SecretReferences, p.Secrets)
	c.trackedPackages([]any{"body", "tracked_packages"}, req.TrackedPackages)
	return p, c.ps, aliased
}

// mergeWith is mergePatch with what a request adds to its draft: the
// removals (Remove) and the resource_spec merge (MergeResourceSpec),
// whose result is checked whole.
func (cp *ControlPlane) mergeWith(stored *deploymentRecord, p *Deployment, req *UpdateDeploymentRequest, pure []apierr.Problem, aliased bool) (deploymentRecord, []apierr.Problem, bool) {
	merged, ps, trigger := mergePatch(stored, p, req.RevisionSource, pure, aliased, cp.hooks)
	var removed bool
	ps, removed = applyRemovals(stored.Source, p, &merged.Deployment, req.Remove, ps)
	trigger = trigger || removed
	members := specRemovals(req.Remove)
	if !req.MergeResourceSpec {
		if len(members) > 0 {
			ps = append(ps, apierr.Problem{Loc: bodyLoc(locResourceSpec), Type: apierr.TypeValueError,
				Msg: "Members of resource_spec can be removed only by a merge (MergeResourceSpec; a JSON merge patch)"})
		}
		if p.SourceConfig.ResourceSpec != nil {
			ps = checkScaleToZero(&merged.Deployment, ps)
		}
		return merged, ps, trigger
	}
	if p.SourceConfig.ResourceSpec == nil && len(members) == 0 {
		return merged, ps, trigger
	}
	if rules[ruleIndex(locResourceSpec)].patch[sourceIndex(stored.Source)] == PatchNotApplicable {
		if p.SourceConfig.ResourceSpec == nil { // else the table reported it
			ps = append(ps, notApplicable(&rules[ruleIndex(locResourceSpec)], stored.Source))
		}
		return merged, ps, trigger
	}
	spec, sps := mergeSpec(stored.SourceConfig.ResourceSpec, p.SourceConfig.ResourceSpec, members)
	ps = append(ps, sps...)
	merged.SourceConfig.ResourceSpec = spec
	c := &checker{lim: cp.lim, sh: cp.shapes}
	c.checkDeploymentValues(&Deployment{Source: stored.Source, SourceConfig: SourceConfig{ResourceSpec: spec}})
	ps = append(ps, c.ps...)
	ps = checkScaleToZero(&merged.Deployment, ps)
	return merged, ps, true
}

// checkSecretNames is the cross-field rule of a PATCH that replaces one
// of secrets and secret_references but not the other: a name may not be
// in both lists of the merged deployment (a request that gives both was
// checked by checkPatch).
func checkSecretNames(merged, p *Deployment, ps []apierr.Problem) []apierr.Problem {
	switch {
	case len(p.Secrets) > 0 && len(p.SecretReferences) == 0:
		for i, s := range p.Secrets {
			if slices.ContainsFunc(merged.SecretReferences, func(r SecretReference) bool { return r.Name == s.Name }) {
				ps = append(ps, apierr.Problem{Loc: []any{"body", "secrets", i, "name"}, Type: apierr.TypeDuplicate,
					Msg: "A secret reference of this name is in secret_references"})
			}
		}
	case len(p.SecretReferences) > 0 && len(p.Secrets) == 0:
		for i, r := range p.SecretReferences {
			if slices.ContainsFunc(merged.Secrets, func(s Secret) bool { return s.Name == r.Name }) {
				ps = append(ps, apierr.Problem{Loc: []any{"body", "secret_references", i, "name"}, Type: apierr.TypeDuplicate,
					Msg: "A secret of this name is in secrets"})
			}
		}
	}
	return ps
}

// mergePatch applies the draft p of a PATCH to stored: the merged record
// (stored's fields replaced, never written through), every problem (the
// table's, then pure, then the cross-field ones of the merged deployment)
// and whether a new revision is due. aliased (from checkPatch) moves the
// problems about graph_config_path to the key the client sent.
func mergePatch(stored *deploymentRecord, p *Deployment, revisionSource *Source, pure []apierr.Problem, aliased bool, h ruleHooks) (deploymentRecord, []apierr.Problem, bool) {
	merged := *stored
	ps, trigger := applyPatchTable(&stored.Deployment, p, &merged.Deployment, nil, h)
	rsProblem := revisionSourceProblem
	if h.revisionSourceProblem != nil {
		rsProblem = h.revisionSourceProblem
	}
	ps = rsProblem(stored.Source, revisionSource, ps)
	ps = append(ps, pure...)
	ps = checkTagRef(&merged.Deployment, ps, h)
	ps = checkSecretNames(&merged.Deployment, p, ps)
	return merged, aliasLocs(ps, aliased), trigger
}
