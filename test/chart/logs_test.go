package chart_test

import (
	"strings"
	"sync"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// logBuffer holds what the manager under test logs: controller-runtime's logger and
// klog, where client-go reports failed watches and rejected events.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Reset()
}

// Len is how much has been logged.
func (l *logBuffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}

// lines is what was logged from offset from to the end of the last whole line, and that
// end: a reader that passes the end back next time reads each line once.
func (l *logBuffer) lines(from int) (string, int) {
	l.mu.Lock()
	s := l.b.String() // shares the buffer, which Write only appends to
	l.mu.Unlock()
	if from > len(s) { // Reset since
		from = 0
	}
	end := from + strings.LastIndexByte(s[from:], '\n') + 1
	return s[from:end], end
}

// tail is the last n lines, for failure messages.
func (l *logBuffer) tail(n int) string {
	lines := strings.Split(strings.TrimRight(l.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var logs = &logBuffer{}

// setupLogCapture sends both loggers to logs; it runs once, before anything logs.
func setupLogCapture() {
	logger := zap.New(zap.WriteTo(logs), zap.ConsoleEncoder())
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
}
