module github.com/sluicehq/sluice/bench/proxies

go 1.26.0

require (
	github.com/caddyserver/caddy/v2 v2.11.9
	github.com/sluicehq/sluice v0.0.0
)

replace github.com/sluicehq/sluice => ../..
