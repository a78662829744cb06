package deploydocker

import (
	"fmt"
	"os"
	"strings"

	"github.com/deployplane/deployplane/controlplane"
)

// SecretRefKey is the key of Options.SecretRefs for a secret reference:
// "secret_name/secret_key".
func SecretRefKey(ref controlplane.SecretReference) string {
	return ref.SecretName + "/" + ref.SecretKey
}

// checkSecretRefs checks Options.SecretRefs: each key names a secret and
// a key, each value a source "file:PATH" or "env:NAME".
func checkSecretRefs(refs map[string]string) error {
	for k, v := range refs {
		name, key, ok := strings.Cut(k, "/")
		if !ok || name == "" || key == "" {
			return fmt.Errorf("deploydocker: Options.SecretRefs: key %q is not secret_name/secret_key", k)
		}
		kind, rest, _ := strings.Cut(v, ":")
		if (kind != "file" && kind != "env") || rest == "" {
			return fmt.Errorf("deploydocker: Options.SecretRefs[%q]: %q is neither file:PATH nor env:NAME", k, v)
		}
	}
	return nil
}

// SecretReferenceProblem says why the Deployer cannot resolve ref ("" when
// it can): the operator maps no value to its secret and key
// (Options.SecretRefs). A control plane asks it when a deployment is
// created or changed (controlplane.Options.SecretReferenceProblem).
func (d *Deployer) SecretReferenceProblem(ref controlplane.SecretReference) string {
	return SecretRefProblem(d.o.SecretRefs, ref)
}

// SecretRefProblem is SecretReferenceProblem of a Deployer whose
// Options.SecretRefs are refs, for a control plane that starts before its
// Deployer.
func SecretRefProblem(refs map[string]string, ref controlplane.SecretReference) string {
	if _, ok := refs[SecretRefKey(ref)]; ok {
		return ""
	}
	return fmt.Sprintf("The Docker deployer has no value for secret %s key %s: its operator maps one with -docker-secret-ref %s=file:PATH or =env:NAME",
		ref.SecretName, ref.SecretKey, SecretRefKey(ref))
}

// secretRefEnv resolves the revision's secret references into environment
// entries, reading each mapped file or variable now, so that a revision
// starts with the values of the moment it starts. A reference the
// operator maps nothing to, or whose file cannot be read, is an error
// naming it: the revision fails.
func (d *Deployer) secretRefEnv(refs []controlplane.SecretReference) ([]string, error) {
	env := make([]string, 0, len(refs))
	for _, ref := range refs {
		src, ok := d.o.SecretRefs[SecretRefKey(ref)]
		if !ok {
			return nil, fmt.Errorf("secret reference %s: %s", ref.Name, d.SecretReferenceProblem(ref))
		}
		kind, rest, _ := strings.Cut(src, ":")
		var v string
		switch kind {
		case "file":
			b, err := os.ReadFile(rest)
			if err != nil {
				return nil, fmt.Errorf("secret reference %s (secret %s key %s): %w", ref.Name, ref.SecretName, ref.SecretKey, err)
			}
			v = string(b)
		case "env":
			var set bool
			if v, set = os.LookupEnv(rest); !set {
				return nil, fmt.Errorf("secret reference %s (secret %s key %s): the deployer's environment has no variable %s",
					ref.Name, ref.SecretName, ref.SecretKey, rest)
			}
		}
		env = append(env, ref.Name+"="+v)
	}
	return env, nil
}
