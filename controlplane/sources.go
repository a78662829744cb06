package controlplane

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/store"
)

// The sources of langgraph deploy (wire contract section 10): the rules
// that are not a column of the rules table.
//
//   - A deployment of internal_source or internal_docker has no revision
//     until what its revisions come from arrives (hasRevisionSource): a
//     create without it leaves latest_revision_id null; a PATCH of a
//     revision-triggering field without it changes the deployment in place
//     and creates nothing; POST .../revisions without it is 422 missing
//     at the field it needs.
//   - revision_source, at the top level of PATCH and POST .../revisions,
//     is null or the deployment's own source.
//   - tracked_packages is kept on the revision a request creates.
//   - source_tarball_path is checked by Options.Uploads and image_uri
//     resolved by Options.Images.
//   - custom_url is not applicable in their requests, but answered: the
//     deployer's address (customURLFromDeployer).

// customURLFromDeployer says whether the read-only custom_url of a
// deployment of source s is the address its deployer reports (Step.URL)
// when a revision becomes active, the same as its url: internal_source
// and internal_docker (wire contract section 10), so that langgraph
// deploy and the CLIs' deployment lists, which show custom_url, show where
// the deployment answers. Their requests may not name one (the rules
// table's not applicable). github's custom_url is assigned at create
// (Options.CustomURLTemplate) and external_docker's is the client's.
func customURLFromDeployer(s Source) bool {
	return s == SourceInternalSource || s == SourceInternalDocker
}

// revisionSourceProblem is the problem of a revision_source that is not
// the deployment's own source (nil: none).
func revisionSourceProblem(own Source, rs *Source, ps []apierr.Problem) []apierr.Problem {
	if rs == nil || *rs == own {
		return ps
	}
	return append(ps, apierr.Problem{Loc: []any{"body", "revision_source"}, Type: apierr.TypeLiteralError,
		Msg: "Input should be '" + string(own) + "' (the deployment's source) or null"})
}

// trackedPackages checks tracked_packages: null, or at most
// MaxTrackedPackages strings of 1 to MaxTrackedPackageChars characters.
// Over the cap is one problem and no item is looked at.
func (c *checker) trackedPackages(loc []any, pkgs []string) {
	if pkgs == nil || !c.items(loc, len(pkgs), MaxTrackedPackages) {
		return
	}
	for i, p := range pkgs {
		switch n := utf8.RuneCountInString(p); {
		case n == 0:
			c.add(at(loc, i), apierr.TypeStringTooShort, "String should have at least 1 character")
		case n > MaxTrackedPackageChars:
			c.add(at(loc, i), apierr.TypeStringTooLong, fmt.Sprintf("String should have at most %d characters", MaxTrackedPackageChars))
		}
	}
}

// noRevisionSource is the problem of POST .../revisions on a deployment
// that has nothing a revision comes from, and a request that brings none.
func noRevisionSource(d *Deployment) apierr.Problem {
	l := revisionSourceLoc[sourceIndex(d.Source)]
	return apierr.Problem{Loc: bodyLoc(l), Type: apierr.TypeMissing,
		Msg: "Field required: a revision of source '" + string(d.Source) + "' comes from it"}
}

var locTarball = []any{"body", "source_revision_config", "source_tarball_path"}

// noUploads is the message of a source_tarball_path named where
// Options.Uploads is nil.
const noUploads = "this server does not accept uploads: no source_tarball_path can be named"

// checkUpload asks Options.Uploads about the source_tarball_path a request
// names for an internal_source deployment (path nil: nothing to check);
// without Options.Uploads every path is refused.
func (cp *ControlPlane) checkUpload(r store.Reader, tenant, deploymentID string, src Source, path *string, ps []apierr.Problem) ([]apierr.Problem, error) {
	if path == nil || src != SourceInternalSource {
		return ps, nil
	}
	if cp.uploads == nil {
		return append(ps, apierr.Problem{Loc: locTarball, Type: apierr.TypeUnknownReference, Msg: noUploads}), nil
	}
	err := cp.uploads.CheckUpload(r, tenant, deploymentID, *path)
	switch {
	case err == nil:
		return ps, nil
	case errors.Is(err, ErrUploadNotFound):
		return append(ps, apierr.Problem{Loc: locTarball, Type: apierr.TypeUnknownReference, Msg: err.Error()}), nil
	}
	return ps, fmt.Errorf("controlplane: checking source_tarball_path: %w", err)
}

var locImage = []any{"body", "source_revision_config", "image_uri"}

// resolveImage asks Options.Images for the image_uri an internal_docker
// revision records, writing it into *image; a refused image is a problem.
func (cp *ControlPlane) resolveImage(ctx context.Context, tenant, deploymentID string, image *string, ps []apierr.Problem) ([]apierr.Problem, error) {
	if cp.images == nil || image == nil {
		return ps, nil
	}
	got, err := cp.images.ResolveImage(ctx, tenant, deploymentID, *image)
	switch {
	case err == nil:
		*image = got
		return ps, nil
	case errors.Is(err, ErrImageNotFound):
		return append(ps, apierr.Problem{Loc: locImage, Type: apierr.TypeUnknownReference, Msg: err.Error()}), nil
	}
	return ps, fmt.Errorf("controlplane: resolving image_uri: %w", err)
}

// sourceOf reads the source of a deployment for a PATCH that needs it
// before its transaction (to resolve an image outside it).
func (cp *ControlPlane) sourceOf(ctx context.Context, tenant, id string) (Source, error) {
	var src Source
	err := cp.st.View(ctx, func(r store.Reader) error {
		d, err := cp.getDeployment(r, tenant, id)
		if err == nil {
			src = d.Source
		}
		return err
	})
	return src, err
}
