package datadir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseStore(t *testing.T) {
	for _, v := range []string{"", "sqlite", "  "} {
		if s, err := ParseStore(v); err != nil || s.Postgres() || s.String() != "sqlite" {
			t.Errorf("%q: %+v %v", v, s, err)
		}
	}
	for v, id := range map[string]string{
		"postgres://irisgate:s3cret@db:5433/iris?sslmode=require&application_name=x": "postgres://irisgate@db:5433/iris",
		"postgresql://irisgate:s3cret@db/iris":                                       "postgres://irisgate@db:5432/iris",
		"postgres://irisgate@/iris?host=/run/postgresql&password=s3cret":             "postgres://irisgate@/iris?host=%2Frun%2Fpostgresql&port=5432",
	} {
		s, err := ParseStore(v)
		if err != nil || !s.Postgres() || s.ID != id || s.URL != v {
			t.Errorf("%q: %+v %v, want id %s", v, s, err, id)
		}
	}
	for _, v := range []string{"mysql://root:s3cret@db/x", "host=db password=s3cret", "postgres://u:s3cret@db:notaport/x"} {
		_, err := ParseStore(v)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: %v", v, err)
		}
	}
}

func TestStoreBinding(t *testing.T) {
	a, _ := ParseStore("postgres://irisgate:one@db/iris")
	aOther, _ := ParseStore("postgres://irisgate:two@db/iris?sslmode=verify-full")
	b, _ := ParseStore("postgres://irisgate:one@db2/iris")
	sqlite := Store{}

	dir := filepath.Join(t.TempDir(), "d")
	if _, err := PrepareFiles(dir, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, DBFile)); !os.IsNotExist(err) {
		t.Fatalf("PrepareFiles made the SQLite file: %v", err)
	}
	if HasData(dir) {
		t.Fatal("a new directory has data")
	}
	if err := CheckStore(dir, a); err != nil {
		t.Fatal(err)
	}
	if err := BindStore(dir, a); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, StoreFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the store file: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, StoreFile)); strings.Contains(string(b), "one") {
		t.Fatalf("the password was written: %s", b)
	}
	if !HasData(dir) {
		t.Fatal("a directory bound to a database has no data")
	}
	// The same database with another password or options is the same.
	if err := CheckStore(dir, aOther); err != nil {
		t.Fatalf("the same database: %v", err)
	}
	var mm *StoreMismatchError
	if err := CheckStore(dir, sqlite); !errors.As(err, &mm) || !strings.Contains(err.Error(), "keeps its state in PostgreSQL (postgres://irisgate@db:5432/iris): give the same --store") {
		t.Fatalf("SQLite on a PostgreSQL directory: %v", err)
	}
	if err := CheckStore(dir, b); !errors.As(err, &mm) || !strings.Contains(err.Error(), "belongs with the database postgres://irisgate@db:5432/iris, not postgres://irisgate@db2:5432/iris") {
		t.Fatalf("another database: %v", err)
	}

	// A SQLite directory: an empty file (Prepare's) is no data yet, one
	// with data is not served on PostgreSQL.
	sq := t.TempDir()
	if _, err := Prepare(sq, false); err != nil {
		t.Fatal(err)
	}
	if err := CheckStore(sq, a); err != nil {
		t.Fatalf("an empty SQLite file: %v", err)
	}
	os.WriteFile(filepath.Join(sq, DBFile+"-wal"), []byte("frames"), 0o600)
	if err := CheckStore(sq, a); !errors.As(err, &mm) || !strings.Contains(err.Error(), "serve it without --store to keep using it") {
		t.Fatalf("a SQLite directory with data: %v", err)
	}
	if err := CheckStore(sq, sqlite); err != nil {
		t.Fatal(err)
	}

	// A store file that names nothing is an error, not SQLite.
	os.WriteFile(filepath.Join(sq, StoreFile), []byte("# nothing\n"), 0o600)
	if err := CheckStore(sq, sqlite); err == nil || !strings.Contains(err.Error(), "names no database") {
		t.Fatalf("an empty store file: %v", err)
	}
}
