package redisstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/ratelimit"
)

// A store's settings are a small table of strings that every process
// sharing the Redis reads: the admin API's overrides and enforcement
// percentages, so that an operator's action in one gateway holds for the
// fleet. They live in one hash and a version counter, both in the hash
// slot of the tag "{sluice-admin}" (so they work on a Cluster), under the
// store's Prefix. Each change increments the version, so a process polls
// one GET and reads the table only when it changed.

func (s *Store) settingsKeys() (table, version string) {
	return s.opts.Prefix + "settings{sluice-admin}", s.opts.Prefix + "settings-version{sluice-admin}"
}

func (s *Store) client() (rueidis.Client, error) {
	if s.closed.Load() {
		return nil, ratelimit.ErrClosed
	}
	cn := s.conn.Load()
	if cn == nil || s.link.Whole().Open() {
		return nil, fmt.Errorf("%w: not connected", ErrUnavailable)
	}
	return cn.client, nil
}

// PutSetting sets the setting field to value and bumps the version.
func (s *Store) PutSetting(ctx context.Context, field, value string) error {
	c, err := s.client()
	if err != nil {
		return err
	}
	table, version := s.settingsKeys()
	for _, r := range c.DoMulti(ctx,
		c.B().Hset().Key(table).FieldValue().FieldValue(field, value).Build(),
		c.B().Incr().Key(version).Build()) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("%w: put setting: %v", ErrUnavailable, err)
		}
	}
	return nil
}

// DeleteSettings deletes the settings fields and bumps the version.
func (s *Store) DeleteSettings(ctx context.Context, fields ...string) error {
	if len(fields) == 0 {
		return nil
	}
	c, err := s.client()
	if err != nil {
		return err
	}
	table, version := s.settingsKeys()
	for _, r := range c.DoMulti(ctx, c.B().Hdel().Key(table).Field(fields...).Build(), c.B().Incr().Key(version).Build()) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("%w: delete settings: %v", ErrUnavailable, err)
		}
	}
	return nil
}

// SettingsVersion returns the settings' version: it changes with every
// PutSetting and DeleteSettings (0 before the first).
func (s *Store) SettingsVersion(ctx context.Context) (int64, error) {
	c, err := s.client()
	if err != nil {
		return 0, err
	}
	_, version := s.settingsKeys()
	v, err := c.Do(ctx, c.B().Get().Key(version).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%w: settings version: %v", ErrUnavailable, err)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("redisstore: settings version %q: %v", v, err)
	}
	return n, nil
}

// Settings returns every setting and the version they are at.
func (s *Store) Settings(ctx context.Context) (version int64, fields map[string]string, err error) {
	c, err := s.client()
	if err != nil {
		return 0, nil, err
	}
	table, vkey := s.settingsKeys()
	rs := c.DoMulti(ctx, c.B().Get().Key(vkey).Build(), c.B().Hgetall().Key(table).Build())
	v, err := rs[0].ToString()
	switch {
	case rueidis.IsRedisNil(err):
	case err != nil:
		return 0, nil, fmt.Errorf("%w: settings: %v", ErrUnavailable, err)
	default:
		if version, err = strconv.ParseInt(v, 10, 64); err != nil {
			return 0, nil, fmt.Errorf("redisstore: settings version %q: %v", v, err)
		}
	}
	fields, err = rs[1].AsStrMap()
	if err != nil {
		return 0, nil, fmt.Errorf("%w: settings: %v", ErrUnavailable, err)
	}
	return version, fields, nil
}
