package gateway

import (
	"log"
	"log/slog"
)

// slogErrorLog adapts a slog.Logger for http.Server.ErrorLog.
func slogErrorLog(l *slog.Logger) *log.Logger {
	return slog.NewLogLogger(l.Handler(), slog.LevelWarn)
}
