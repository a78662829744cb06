package controlplane

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/deployplane/deployplane/internal/wirejson"
)

// deploymentJSON is Deployment as encoded: the same fields, names and
// order, with wirejson.Time timestamps (TestWireMirrors keeps them in step).
type deploymentJSON struct {
	ID                   string               `json:"id"`
	Name                 string               `json:"name"`
	Source               Source               `json:"source"`
	SourceConfig         SourceConfig         `json:"source_config"`
	SourceRevisionConfig SourceRevisionConfig `json:"source_revision_config"`
	Secrets              []Secret             `json:"secrets"`
	CreatedAt            wirejson.Time        `json:"created_at"`
	UpdatedAt            wirejson.Time        `json:"updated_at"`
	Status               DeploymentStatus     `json:"status"`
	LatestRevisionID     *string              `json:"latest_revision_id"`
	ActiveRevisionID     *string              `json:"active_revision_id"`
	ImageVersion         *string              `json:"image_version"`
}

// MarshalJSON encodes d with its timestamps in the wire format
// (2026-11-21T10:04:05.123456Z: UTC, six fractional digits).
func (d Deployment) MarshalJSON() ([]byte, error) { return json.Marshal(d.mirror()) }

// mirror is d as encoded.
func (d Deployment) mirror() any {
	return &deploymentJSON{
		ID:                   d.ID,
		Name:                 d.Name,
		Source:               d.Source,
		SourceConfig:         d.SourceConfig,
		SourceRevisionConfig: d.SourceRevisionConfig,
		Secrets:              d.Secrets,
		CreatedAt:            wirejson.Time(d.CreatedAt),
		UpdatedAt:            wirejson.Time(d.UpdatedAt),
		Status:               d.Status,
		LatestRevisionID:     d.LatestRevisionID,
		ActiveRevisionID:     d.ActiveRevisionID,
		ImageVersion:         d.ImageVersion,
	}
}

// revisionJSON is Revision as encoded (see deploymentJSON).
type revisionJSON struct {
	ID                   string               `json:"id"`
	CreatedAt            wirejson.Time        `json:"created_at"`
	UpdatedAt            wirejson.Time        `json:"updated_at"`
	Status               RevisionStatus       `json:"status"`
	Source               Source               `json:"source"`
	SourceRevisionConfig SourceRevisionConfig `json:"source_revision_config"`
	StatusMessage        *string              `json:"status_message"`
}

// MarshalJSON encodes r with its timestamps in the wire format.
func (r Revision) MarshalJSON() ([]byte, error) { return json.Marshal(r.mirror()) }

// mirror is r as encoded.
func (r Revision) mirror() any {
	return &revisionJSON{
		ID:                   r.ID,
		CreatedAt:            wirejson.Time(r.CreatedAt),
		UpdatedAt:            wirejson.Time(r.UpdatedAt),
		Status:               r.Status,
		Source:               r.Source,
		SourceRevisionConfig: r.SourceRevisionConfig,
		StatusMessage:        r.StatusMessage,
	}
}

// listenerJSON is Listener as encoded (see deploymentJSON).
type listenerJSON struct {
	ID            string        `json:"id"`
	ComputeType   string        `json:"compute_type"`
	ComputeID     string        `json:"compute_id"`
	ComputeConfig ComputeConfig `json:"compute_config"`
	Version       string        `json:"version"`
	CreatedAt     wirejson.Time `json:"created_at"`
	UpdatedAt     wirejson.Time `json:"updated_at"`
}

// MarshalJSON encodes l with its timestamps in the wire format.
func (l Listener) MarshalJSON() ([]byte, error) { return json.Marshal(l.mirror()) }

// mirror is l as encoded.
func (l Listener) mirror() any {
	return &listenerJSON{
		ID:            l.ID,
		ComputeType:   l.ComputeType,
		ComputeID:     l.ComputeID,
		ComputeConfig: l.ComputeConfig,
		Version:       l.Version,
		CreatedAt:     wirejson.Time(l.CreatedAt),
		UpdatedAt:     wirejson.Time(l.UpdatedAt),
	}
}

// MarshalJSON encodes p as encoding/json would encode its fields, calling
// each deployment's MarshalJSON directly: json.Marshal validates and
// compacts whatever a MarshalJSON method returns, which for a page of wire
// values would double the cost of encoding it.
func (p DeploymentPage) MarshalJSON() ([]byte, error) { return marshalPage(p.Resources, p.Offset) }

// MarshalJSON encodes p; see DeploymentPage.MarshalJSON.
func (p RevisionPage) MarshalJSON() ([]byte, error) { return marshalPage(p.Resources, p.Offset) }

// MarshalJSON encodes p; see DeploymentPage.MarshalJSON.
func (p ListenerPage) MarshalJSON() ([]byte, error) { return marshalPage(p.Resources, p.Offset) }

// mirrored is a wire type: mirror returns the struct it encodes as.
type mirrored interface{ mirror() any }

// marshalPage encodes {"resources":items,"offset":offset}: one buffer and
// one json.Encoder for all items (Encode writes what json.Marshal returns,
// and a newline, which is cut).
func marshalPage[T mirrored](items []T, offset int) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(`{"resources":`)
	if items == nil {
		buf.WriteString("null")
	} else {
		buf.WriteByte('[')
		enc := json.NewEncoder(&buf)
		for i := range items {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := enc.Encode(items[i].mirror()); err != nil {
				return nil, err
			}
			buf.Truncate(buf.Len() - 1)
			if i == 0 {
				buf.Grow(buf.Len() * len(items))
			}
		}
		buf.WriteByte(']')
	}
	buf.WriteString(`,"offset":`)
	buf.Write(strconv.AppendInt(buf.AvailableBuffer(), int64(offset), 10))
	buf.WriteByte('}')
	return buf.Bytes(), nil
}
