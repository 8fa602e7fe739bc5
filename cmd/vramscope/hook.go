package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/vramscope/vramscope/capture"
)

func newHookCommand(stdout io.Writer) *cobra.Command {
	var path bool
	var dir string
	cmd := &cobra.Command{
		Use:   "hook (--path | --write DIR)",
		Short: "Give the Python hook that record injects, for explicit use",
		Long: `Hook gives the Python file that record injects, vramscope_hook.py, as a
module for code that wants explicit control (it needs nothing beyond torch):

  import vramscope_hook
  vramscope_hook.start(out="runs/mem", steps=[2, 3, 4])  # or VRAMSCOPE_* variables
  vramscope_hook.step(n)          # marks step n, for loops without an optimizer
  vramscope_hook.dump("reason")   # a snapshot now
  with vramscope_hook.capture(out="runs/mem"):  # records inside, dumps at the end
      ...

--path writes it to vramscope's cache folder (once per version) and prints
its path; --write DIR writes DIR/vramscope_hook.py.`,
		Example: `  PYTHONPATH=$(dirname $(vramscope hook --path)) python serve.py
  vramscope hook --write src/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var target string
			switch {
			case path == (dir != ""):
				return errors.New("give one of --path and --write DIR")
			case path:
				cache, err := os.UserCacheDir()
				if err != nil {
					return &outputError{path: "the cache folder", err: err}
				}
				sum := sha256.Sum256(capture.HookSource)
				target = filepath.Join(cache, "vramscope", "hook-"+hex.EncodeToString(sum[:6]))
			default:
				target = dir
			}
			written, err := capture.WriteModule(target)
			if err != nil {
				return &outputError{path: filepath.Join(target, capture.ModuleName), err: err}
			}
			_, err = fmt.Fprintln(stdout, written)
			return err
		},
	}
	cmd.Flags().BoolVar(&path, "path", false, "print the path of the hook module")
	cmd.Flags().StringVar(&dir, "write", "", "write the hook module into `DIR`")
	return cmd
}
