package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// A database is served by one gateway alone, or by replicas. Replicas
// sharing one (issue 18) need what a lone gateway does not: NATS to
// deliver one replica's frames to the devices of another, a lease per lane
// so a lane never runs two turns at once, a claim on each push. A lone
// gateway beside replicas would see only its own devices' frames until a
// sync, and could answer one message twice. The data directory's lock
// cannot stop that (two directories, one database), so the database
// carries a lock of its own: a session advisory lock (exclusive for a
// lone gateway, shared among replicas), held on a connection
// of its own for as long as the gateway serves. PostgreSQL drops it when
// that session ends, however it ends (a crash, kill -9, a lost network),
// so it never needs clearing by hand.

// The advisory lock's key is pg_try_advisory_lock(1230129491, 1):
// 0x49524953 ("IRIS") and 1, which pg_locks shows as classid 1230129491,
// objid 1, objsubid 2. Advisory locks belong to one database, so the
// gateways of other databases on the same server are not concerned.

// servingCheck is how often a held lock's session is checked, and a lost
// one taken again.
const servingCheck = 5 * time.Second

// ServedError is Serve's refusal: another gateway serves the database.
type ServedError struct {
	// By is the other gateway's session name (application_name: host,
	// pid and data directory as it gave them), From its address and Since
	// when it connected; each empty or zero where PostgreSQL does not show
	// it to this user.
	By, From string
	Since    time.Time
	// Replica says the refused gateway asked to be a replica (so the
	// holder serves alone); otherwise the holder may be replicas.
	Replica bool
}

func (e *ServedError) Error() string {
	if e.Replica {
		return "postgres: the database is served by " + e.who() + " alone, not as a replica: " +
			"stop it and start every gateway on this database as a replica (--nats), or give this one a database of its own (--store)"
	}
	return "postgres: the database is served by " + e.who() + ": several gateways on one database must all be replicas " +
		"(--nats: NATS keeps their devices in step, leases decide who answers a message); " +
		"start this one as a replica, stop the other gateway first, or give this one a database of its own (--store)"
}

func (e *ServedError) who() string {
	who := "another irisgate"
	if e.By != "" {
		who += " (" + e.By
		if e.From != "" {
			who += ", from " + e.From
		}
		if !e.Since.IsZero() {
			who += ", connected " + e.Since.Local().Format(time.DateTime)
		}
		who += ")"
	}
	return who
}

// goneWait bounds the wait for the session of a holder that has died.
const goneWait = 10 * time.Second

// gone reports whether the holder named itself (appName) as a process of
// this host that has ended.
func (e *ServedError) gone() bool {
	host, _ := os.Hostname()
	rest, ok := strings.CutPrefix(e.By, "irisgate serve "+host+" pid ")
	if !ok || host == "" {
		return false
	}
	num, _, _ := strings.Cut(rest, " ")
	pid, err := strconv.Atoi(num)
	if err != nil || pid <= 0 {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	return errors.Is(p.Signal(syscall.Signal(0)), os.ErrProcessDone)
}

// Serving is a gateway's hold on its database (Serve). Close it when the
// gateway stops.
type Serving struct {
	cfg    *pgx.ConnConfig
	log    *slog.Logger
	shared bool // a replica's hold: shared with the other replicas

	mu   sync.Mutex
	conn *pgx.Conn // nil while lost
	lost string    // why the hold was lost, "" while held (said once)

	ctx    context.Context // the watch's, ended by Close
	stop   context.CancelFunc
	done   chan struct{}
	closed sync.Once
}

// Serve takes the database for one gateway, or returns a *ServedError
// naming the gateway that has it. who says which gateway this is (its
// host, pid and data directory, as another one's refusal will show it).
// While it is held, a session that dies (the server restarted, the
// network dropped) is noticed within servingCheck and taken again.
func (s *Store) Serve(ctx context.Context, who string) (*Serving, error) {
	return s.serve(ctx, who, false)
}

// ServeReplica takes the database for one of several replicas: the same
// lock taken shared, so replicas coexist while a gateway serving alone
// (Serve) and replicas refuse each other. What keeps replicas in step is
// theirs (NATS, leases); this only keeps a lone gateway out.
func (s *Store) ServeReplica(ctx context.Context, who string) (*Serving, error) {
	return s.serve(ctx, who, true)
}

func (s *Store) serve(ctx context.Context, who string, shared bool) (*Serving, error) {
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = appName(who)
	h := &Serving{cfg: cfg, log: s.log, shared: shared, done: make(chan struct{})}
	// A holder that is a process of this host that no longer exists (a
	// gateway killed and restarted at once) is waited for: its session
	// ends a moment after it, when its backend notices.
	deadline := time.Now().Add(goneWait)
	var conn *pgx.Conn
	for {
		var err error
		conn, err = h.take(ctx)
		var se *ServedError
		if err == nil {
			break
		}
		if !errors.As(err, &se) || !se.gone() || time.Now().After(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(50 * time.Millisecond):
		}
	}
	h.conn = conn
	h.ctx, h.stop = context.WithCancel(context.Background())
	go h.watch()
	return h, nil
}

// Who is what a gateway says of itself to Serve: this host, this
// process, its data directory. (gone reads it back.)
func Who(dataDir string) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s pid %d %s", host, os.Getpid(), dataDir)
}

// appName fits who into application_name (NAMEDATALEN: 63 bytes).
func appName(who string) string {
	name := "irisgate serve " + who
	for len(name) > 63 {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	return name
}

// take connects and locks, on a connection outside the pool: the lock
// lives as long as that session.
func (h *Serving) take(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, h.cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	var got bool
	lock := `SELECT pg_try_advisory_lock(1230129491, 1)`
	if h.shared {
		lock = `SELECT pg_try_advisory_lock_shared(1230129491, 1)`
	}
	if err := conn.QueryRow(ctx, lock).Scan(&got); err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("postgres: taking the database: %w", err)
	}
	if got {
		return conn, nil
	}
	e := &ServedError{Replica: h.shared}
	var since *time.Time
	// The holder's session, where this user may see it: PostgreSQL hides
	// other roles' application names from an ordinary user.
	err = conn.QueryRow(ctx, `SELECT COALESCE(a.application_name, ''), COALESCE(host(a.client_addr), ''), a.backend_start
		FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 1230129491 AND l.objid = 1 AND l.objsubid = 2
		  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY a.backend_start LIMIT 1`).Scan(&e.By, &e.From, &since)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		h.log.Debug("postgres: who serves the database", "err", err)
	}
	if since != nil {
		e.Since = *since
	}
	conn.Close(ctx)
	return nil, e
}

// Check makes sure the hold is still there: it asks the holding session,
// and takes the lock again on a new one when that session is gone. The
// watch calls it every servingCheck; tests call it to skip the wait.
func (h *Serving) Check(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn != nil {
		pctx, cancel := context.WithTimeout(ctx, servingCheck)
		err := h.conn.Ping(pctx)
		cancel()
		if err == nil {
			return nil
		}
		h.conn.Close(context.Background())
		h.conn = nil
		h.log.Warn("postgres: the session holding the database ended; taking it again", "err", err)
	}
	conn, err := h.take(ctx)
	if err != nil {
		// Said once per cause, not at every check.
		if msg := err.Error(); msg != h.lost {
			h.lost = msg
			if errors.As(err, new(*ServedError)) {
				h.log.Error("postgres: another gateway took the database while this one could not reach it; stop one of them", "err", err)
			} else {
				h.log.Warn("postgres: cannot take the database again yet", "err", err)
			}
		}
		return err
	}
	h.conn, h.lost = conn, ""
	h.log.Info("postgres: the database is held again")
	return nil
}

func (h *Serving) watch() {
	defer close(h.done)
	tick := time.NewTicker(servingCheck)
	defer tick.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-tick.C:
			h.Check(h.ctx)
		}
	}
}

// Close lets the database go: its session ends, and with it the lock.
func (h *Serving) Close() {
	if h == nil {
		return
	}
	h.closed.Do(func() {
		h.stop()
		<-h.done
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.conn != nil {
			// Unlocked before the session ends: a session's locks go
			// only once its backend has exited, a moment after the
			// connection closes, and a gateway started right after this
			// one stopped would be refused meanwhile.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			unlock := `SELECT pg_advisory_unlock(1230129491, 1)`
			if h.shared {
				unlock = `SELECT pg_advisory_unlock_shared(1230129491, 1)`
			}
			h.conn.Exec(ctx, unlock)
			h.conn.Close(ctx)
			cancel()
			h.conn = nil
		}
	})
}
