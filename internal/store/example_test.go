package store_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/store"
)

func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "buddy-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	st, err := store.Open(ctx, filepath.Join(dir, "data", "buddy.db"), store.Options{MaxKeys: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close(context.Background())

	// The skill registry.
	err = st.InsertSkill(ctx, store.InstalledSkill{Name: "echo", Version: "1.0.0", Status: store.StatusVerified})
	fmt.Println("install:", err)
	err = st.InsertSkill(ctx, store.InstalledSkill{Name: "echo", Version: "6.6.6"})
	fmt.Println("install again:", errors.Is(err, store.ErrExists), errs.KindOf(err))

	// A skill's key-value store, with quotas.
	_ = st.KVSet(ctx, "echo", "a", []byte("1"))
	_ = st.KVSet(ctx, "echo", "b", []byte("2"))
	err = st.KVSet(ctx, "echo", "c", []byte("3"))
	fmt.Println("third key:", err)

	// A skill's memories, searched by relevance.
	_, _ = st.Remember(ctx, "echo", "the dentist is on Tuesday at 3pm", []string{"health"})
	_, _ = st.Remember(ctx, "echo", "buy oat milk", []string{"shopping"})
	mems, _ := st.Recall(ctx, "echo", "When is the dentist?", 5)
	for _, m := range mems {
		fmt.Println("recalled:", m.Text, m.Tags)
	}
	// Output:
	// install: <nil>
	// install again: true config
	// third key: namespace "echo": quota kv_keys exceeded: 3 > 2
	// recalled: the dentist is on Tuesday at 3pm [health]
}
