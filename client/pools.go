package client

import (
	"context"
	"net/http"
)

// CreatePool creates a pool (admin). Activities join it with their Pools.
func (c *Client) CreatePool(ctx context.Context, in NewPool) (Pool, error) {
	var p Pool
	_, _, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/pools", body: in, ok: []int{http.StatusCreated}}, &p)
	return p, err
}

// GetPool returns a pool (public): with authoritative seat numbers for an
// admin, with the live seat display's for anyone else (see Pool.Source).
func (c *Client) GetPool(ctx context.Context, id string) (Pool, error) {
	var p Pool
	return p, c.get(ctx, "/v1/pools/"+seg(id), nil, &p)
}

// ListPools returns one page of pools, newest first (admin).
func (c *Client) ListPools(ctx context.Context, o ListOptions) (PoolPage, error) {
	var p PoolPage
	return p, c.get(ctx, "/v1/pools", pageQuery(o.Limit, o.Cursor), &p)
}

// UpdatePool changes the fields of p that are set (admin): lowering the
// capacity below taken evicts nobody, raising it admits waiting users of
// the pool's activities.
func (c *Client) UpdatePool(ctx context.Context, id string, p PoolPatch) (Pool, error) {
	var out Pool
	_, _, err := c.call(ctx, request{method: http.MethodPatch, path: "/v1/pools/" + seg(id), body: p, ok: []int{http.StatusOK}}, &out)
	return out, err
}
