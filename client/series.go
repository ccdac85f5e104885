package client

import (
	"context"
	"net/http"
)

// CreateSeries creates a series (admin). Activities join it with their
// SeriesID.
func (c *Client) CreateSeries(ctx context.Context, in NewSeries) (Series, error) {
	var s Series
	_, _, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/series", body: in, ok: []int{http.StatusCreated}}, &s)
	return s, err
}

// GetSeries returns a series (admin).
func (c *Client) GetSeries(ctx context.Context, id string) (Series, error) {
	var s Series
	return s, c.get(ctx, "/v1/series/"+seg(id), nil, &s)
}

// ListSeries returns one page of series, newest first (admin).
func (c *Client) ListSeries(ctx context.Context, o ListOptions) (SeriesPage, error) {
	var p SeriesPage
	return p, c.get(ctx, "/v1/series", pageQuery(o.Limit, o.Cursor), &p)
}

// UpdateSeries changes the fields of p that are set (admin): lowering the
// limit removes nobody, it refuses the signups that would go over it.
func (c *Client) UpdateSeries(ctx context.Context, id string, p SeriesPatch) (Series, error) {
	var out Series
	_, _, err := c.call(ctx, request{method: http.MethodPatch, path: "/v1/series/" + seg(id), body: p, ok: []int{http.StatusOK}}, &out)
	return out, err
}
