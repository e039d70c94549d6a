package storetest

import (
	"reflect"
	"testing"
	"time"

	"github.com/irisgate/irisgate/store"
)

var cronTests = []test{
	{"CronJobsRoundTrip", testCronJobs},
	{"CronWritersKeepEachOthersChanges", testCronWriters},
}

func testCronJobs(t *testing.T, s Store) {
	t0 := time.UnixMilli(1_800_000_000_000)
	j := store.CronJob{ID: "cron_1", Name: "daily", Schedule: "0 9 * * *", Prompt: "sum up", ChatID: "default", ThreadID: "t_1",
		Enabled: true, LastRun: t0.Add(-time.Hour), NextRun: t0, LastErr: "earlier", Created: t0.Add(-48 * time.Hour)}
	fixed := store.CronJob{ID: "cron_0", Schedule: "30m", Text: "stand up", ChatID: "default", Created: t0.Add(-72 * time.Hour)}
	for _, job := range []store.CronJob{j, fixed} {
		if err := s.PutCronJob(bg, job); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.CronJob(bg, "cron_1")
	if err != nil || !sameJob(got, j) {
		t.Fatalf("job\n got %+v, %v\nwant %+v", got, err, j)
	}
	all, err := s.CronJobs(bg)
	if err != nil || len(all) != 2 || !sameJob(all[0], fixed) || !sameJob(all[1], j) {
		t.Fatalf("jobs %+v, %v; want the older first", all, err)
	}
	if _, err := s.CronJob(bg, "cron_none"); !notFound(err) {
		t.Fatalf("an unknown job: %v", err)
	}
	if err := s.DeleteCronJob(bg, "cron_1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteCronJob(bg, "cron_1"); !notFound(err) {
		t.Fatalf("deleting it again: %v", err)
	}
	for _, err := range []error{s.SetCronState(bg, "cron_1", true, t0), s.SetCronErr(bg, "cron_1", "x")} {
		if !notFound(err) {
			t.Fatalf("changing a deleted job: %v", err)
		}
	}
}

// sameJob compares jobs by instant, not by time.Time's representation.
func sameJob(a, b store.CronJob) bool {
	for _, p := range [][2]*time.Time{{&a.LastRun, &b.LastRun}, {&a.NextRun, &b.NextRun}, {&a.Created, &b.Created}} {
		if !p[0].Equal(*p[1]) {
			return false
		}
		*p[0], *p[1] = time.Time{}, time.Time{}
	}
	return reflect.DeepEqual(a, b)
}

// The scheduler fires a job only if nobody paused or rescheduled it since
// it was read, and the writers of jobs (the scheduler, the CLI in another
// process, /cron) touch only their own columns.
func testCronWriters(t *testing.T, s Store) {
	t0 := time.UnixMilli(1_800_000_000_000)
	j := store.CronJob{ID: "cron_1", Name: "daily", Schedule: "every 1h", Prompt: "sum up", ChatID: "default", Enabled: true, NextRun: t0, Created: t0}
	if err := s.PutCronJob(bg, j); err != nil {
		t.Fatal(err)
	}
	if err := s.PauseCronJob(bg, j.ID); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.FireCronJob(bg, j.ID, t0, t0, t0.Add(time.Hour), true); ok || err != nil {
		t.Fatalf("fired a paused job: %v, %v", ok, err)
	}
	t1 := t0.Add(2 * time.Hour)
	if err := s.SetCronState(bg, j.ID, true, t1); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.FireCronJob(bg, j.ID, t0, t0, t0.Add(time.Hour), true); ok {
		t.Fatal("fired a job rescheduled since it was read")
	}
	if ok, err := s.FireCronJob(bg, j.ID, t1, t1, t1.Add(time.Hour), true); !ok || err != nil {
		t.Fatalf("a due job did not fire: %v, %v", ok, err)
	}
	if err := s.SetCronErr(bg, j.ID, "model down"); err != nil {
		t.Fatal(err)
	}
	if err := s.PauseCronJob(bg, j.ID); err != nil {
		t.Fatal(err)
	}
	got, _ := s.CronJob(bg, j.ID)
	if got.Name != "daily" || got.Prompt != "sum up" || got.Enabled || !got.LastRun.Equal(t1) || !got.NextRun.Equal(t1.Add(time.Hour)) || got.LastErr != "model down" {
		t.Fatalf("job after the writers: %+v", got)
	}
	if err := s.PauseCronJob(bg, "cron_none"); !notFound(err) {
		t.Fatalf("pausing an unknown job: %v", err)
	}
	if ok, err := s.FireCronJob(bg, "cron_none", t1, t1, t1, true); ok || err != nil {
		t.Fatalf("firing an unknown job: %v, %v", ok, err)
	}
}
