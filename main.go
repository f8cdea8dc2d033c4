// Command poolsmith is the Poolsmith operator and its offline CLI.
package main

import (
	"os"

	"github.com/poolsmith/poolsmith/internal/cli"
)

func main() {
	os.Exit(cli.Execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
