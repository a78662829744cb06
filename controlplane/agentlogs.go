package controlplane

import (
	"context"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/store"
)

// An agent's logs outside a lease: a Docker agent keeps writing a running
// server's output once its revision is DEPLOYED and the lease is given
// back (as a Deployer does with AppendLogs), and reads a log back. Each
// call is checked against the listener: a deployment placed on another
// listener (or none) is not found.

// checkAgentLines reports the lines of an agent's request whose type or
// level is unknown, at ["body", "lines", i, member]: nothing is written
// then.
func checkAgentLines(lines []LogLine) error {
	c := &checker{}
	for i, l := range lines {
		if l.Type != LogBuild && l.Type != LogDeploy {
			c.add([]any{"body", "lines", i, "type"}, apierr.TypeLiteralError, "Input should be 'build' or 'deploy'")
		}
		if _, ok := parseLevel(string(l.Level)); l.Level != "" && !ok {
			c.add([]any{"body", "lines", i, "level"}, apierr.TypeLiteralError,
				"Input should be 'DEBUG', 'INFO', 'WARNING', 'ERROR' or 'CRITICAL'")
		}
	}
	return apierr.Validation(c.ps...)
}

// agentRevisionIDs checks the tenant and canonicalizes the ids of an
// agent's call about a revision.
func agentRevisionIDs(tenant, listenerID, deploymentID, revisionID string) (lid, did, rid string, err error) {
	lid, err = agentListenerID(tenant, listenerID)
	if err != nil {
		return "", "", "", err
	}
	did, ok := pathID(deploymentID)
	if !ok {
		return "", "", "", &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: deploymentID}
	}
	rid, ok = pathID(revisionID)
	if !ok {
		return "", "", "", &apierr.NotFoundError{Kind: apierr.KindRevision, ID: revisionID}
	}
	return lid, did, rid, nil
}

// agentRevisionExists answers the *apierr.NotFoundError of a deployment
// that is not the listener's, or of a revision that is not the
// deployment's.
func (cp *ControlPlane) agentRevisionExists(r store.Reader, tenant, listenerID, deploymentID, revisionID string) error {
	if _, err := cp.agentDeployment(r, tenant, listenerID, deploymentID); err != nil {
		return err
	}
	return cp.revisionExists(r, tenant, deploymentID, revisionID)
}

// AgentAppendLogs writes lines to the logs of a revision of a deployment
// of the tenant placed on the listener, in one store transaction, outside
// any lease: AppendLogs for an agent (a running server's output once its
// revision is DEPLOYED). Errors: *apierr.ValidationError for a line of
// unknown type or level, at ["body", "lines", i, "type" or "level"]
// (nothing is written), *apierr.NotFoundError (a deployment gone, another
// tenant's or another listener's, or a revision not the deployment's), or
// a store error.
func (cp *ControlPlane) AgentAppendLogs(ctx context.Context, tenant, listenerID, deploymentID, revisionID string, lines ...LogLine) error {
	lid, did, rid, err := agentRevisionIDs(tenant, listenerID, deploymentID, revisionID)
	if err != nil {
		return err
	}
	if err := checkAgentLines(lines); err != nil {
		return err
	}
	now := cp.now()
	err = cp.st.Update(ctx, func(tx store.Tx) error {
		if err := cp.agentRevisionExists(tx, tenant, lid, did, rid); err != nil {
			return err
		}
		return cp.appendLogs(tx, tenant, did, rid, lines, now)
	})
	return cp.storeErr("append agent logs", err)
}

// AgentListLogs returns a page of one log of a revision of a deployment of
// the tenant placed on the listener: ListLogs for an agent. Errors: as
// ListLogs, and a *apierr.NotFoundError for a deployment placed on
// another listener (or none).
func (cp *ControlPlane) AgentListLogs(ctx context.Context, tenant, listenerID, deploymentID, revisionID string, q *LogQuery) (*LogPage, error) {
	lid, did, rid, err := agentRevisionIDs(tenant, listenerID, deploymentID, revisionID)
	if err != nil {
		return nil, err
	}
	if q == nil {
		q = &LogQuery{}
	}
	f, err := q.filter()
	if err != nil {
		return nil, err
	}
	var page *LogPage
	err = cp.st.View(ctx, func(r store.Reader) error {
		if err := cp.agentRevisionExists(r, tenant, lid, did, rid); err != nil {
			return err
		}
		var err error
		page, err = cp.logPage(r, tenant, did, rid, f)
		return err
	})
	if err != nil {
		return nil, cp.storeErr("list agent logs", err)
	}
	return page, nil
}
