//go:build tools

package main

// The generator reads these modules' data files, not their code; importing them pins
// their versions in this module's go.mod and go.sum.
import (
	_ "github.com/LeanerCloud/ec2-instances-info"
	_ "github.com/aws/karpenter-provider-aws/pkg/apis"
)
