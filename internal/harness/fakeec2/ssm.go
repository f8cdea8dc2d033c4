package fakeec2

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

// SSM answers every parameter with an AMI id derived from its path, so the AMI of an
// alias (al2023@latest, al2023@v20250101) is stable, differs per version and architecture,
// and DescribeImages can tell its architecture. It holds no state, so it is safe for
// concurrent use (the provider's fake SSM is not).
type SSM struct{}

// GetParameter returns AMIID(path).
func (SSM) GetParameter(_ context.Context, in *ssm.GetParameterInput, _ ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	return &ssm.GetParameterOutput{Parameter: &ssmtypes.Parameter{Name: in.Name, Value: aws.String(AMIID(aws.ToString(in.Name)))}}, nil
}

var amiIDReplacer = strings.NewReplacer("/aws/service/", "", "/", "-", ".", "", "_", "", "*", "")

// AMIID is the id of the image an SSM path or image name resolves to.
func AMIID(pathOrName string) string {
	return "ami-" + amiIDReplacer.Replace(strings.ToLower(pathOrName))
}
