package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// A gateway keeps its state in the SQLite file of its data directory, or
// in a PostgreSQL database (--store postgres://…). Either way the
// directory holds the rest (media files, Web Push keys, the lock), which
// belongs with that state: a media file is kept because a message in the
// database names it. So a directory served on PostgreSQL records which
// database (StoreFile: the address without its password), and a gateway
// or a command that would pair it with other state is refused, saying
// what to do, rather than starting on an empty store beside the real one.

// Store is a parsed --store: SQLite's file (the zero Store) or a
// PostgreSQL database.
type Store struct {
	URL string // as given, password included; "" for SQLite
	// ID is the database without its password or options
	// (postgres://user@host:port/db), what the directory records.
	ID string
}

// Postgres reports whether the state is in PostgreSQL.
func (s Store) Postgres() bool { return s.URL != "" }

// String is what logs and messages may show: ID, or "sqlite".
func (s Store) String() string {
	if s.URL == "" {
		return "sqlite"
	}
	return s.ID
}

// ParseStore reads a --store value: "" or "sqlite" for the data
// directory's SQLite file, postgres://… or postgresql://… (libpq's URL,
// with its environment: PGPASSWORD, PGSSLMODE, ~/.pgpass) for PostgreSQL.
func ParseStore(v string) (Store, error) {
	v = strings.TrimSpace(v)
	if v == "" || v == "sqlite" {
		return Store{}, nil
	}
	scheme, _, isURL := strings.Cut(v, "://")
	if scheme != "postgres" && scheme != "postgresql" {
		// Never the value itself: it may hold a password.
		what := "is not a URL"
		if isURL {
			what = "is a " + scheme + ":// URL"
		}
		return Store{}, fmt.Errorf("--store %s: want postgres://user:password@host/database, or nothing for the SQLite file in the data directory", what)
	}
	cfg, err := pgconn.ParseConfig(v)
	if err != nil {
		return Store{}, fmt.Errorf("store: %w", err) // pgconn's message leaves the password out
	}
	id := url.URL{Scheme: "postgres", User: url.User(cfg.User), Path: "/" + cfg.Database}
	if strings.HasPrefix(cfg.Host, "/") { // a Unix socket's directory
		id.RawQuery = url.Values{"host": {cfg.Host}, "port": {strconv.Itoa(int(cfg.Port))}}.Encode()
	} else {
		id.Host = cfg.Host + ":" + strconv.Itoa(int(cfg.Port))
	}
	return Store{URL: v, ID: id.String()}, nil
}

// BoundStore is the database dir's state is in, as StoreFile records it;
// "" for the SQLite file.
func BoundStore(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, StoreFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("data directory: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			return line, nil
		}
	}
	return "", fmt.Errorf("data directory: %s names no database", filepath.Join(dir, StoreFile))
}

// StoreMismatchError refuses a store that is not the one dir's state is
// in; its message says what to do.
type StoreMismatchError struct {
	Dir   string
	Bound string // the database dir names, "" for its SQLite file
	Want  Store
}

func (e *StoreMismatchError) Error() string {
	switch {
	case e.Bound == "":
		return fmt.Sprintf("data directory %s holds a gateway's SQLite database (%s), and on PostgreSQL (%s) it would start empty beside it: "+
			"serve it without --store to keep using it, or give PostgreSQL a data directory of its own (--data)", e.Dir, DBFile, e.Want.ID)
	case !e.Want.Postgres():
		return fmt.Sprintf("the gateway of data directory %s keeps its state in PostgreSQL (%s): give the same --store "+
			"(or IRISGATE_STORE, or store in the config file), with its password", e.Dir, e.Bound)
	}
	return fmt.Sprintf("data directory %s belongs with the database %s, not %s (its media files go with that database's messages): "+
		"give that --store; if the database moved, put its new address in %s", e.Dir, e.Bound, e.Want.ID, filepath.Join(e.Dir, StoreFile))
}

// CheckStore refuses s on dir when dir's state is elsewhere: in another
// database, or in its SQLite file (one that holds anything: Prepare
// makes an empty one).
func CheckStore(dir string, s Store) error {
	bound, err := BoundStore(dir)
	if err != nil {
		return err
	}
	switch {
	case bound != "" && bound != s.ID:
		return &StoreMismatchError{Dir: dir, Bound: bound, Want: s}
	case bound == "" && s.Postgres() && hasSQLiteData(dir):
		return &StoreMismatchError{Dir: dir, Want: s}
	}
	return nil
}

// hasSQLiteData reports whether dir's SQLite file (or its write-ahead
// log, after a crash) holds anything.
func hasSQLiteData(dir string) bool {
	for _, name := range []string{DBFile, DBFile + "-wal"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Size() > 0 {
			return true
		}
	}
	return false
}

// BindStore records that dir's state is in s (a PostgreSQL database),
// replacing the file whole so a crash never leaves half an address.
func BindStore(dir string, s Store) error {
	if !s.Postgres() {
		return nil
	}
	if bound, err := BoundStore(dir); err != nil || bound == s.ID {
		return err
	}
	p := filepath.Join(dir, StoreFile)
	tmp := p + ".tmp"
	body := "# The PostgreSQL database this data directory's gateway keeps its state in (irisgate serve --store).\n" + s.ID + "\n"
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("data directory: %w", err)
	}
	return nil
}
