package migrate

import (
	"maps"
	"slices"
	"strings"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	"k8s.io/utils/ptr"
)

// aliasFamilies maps an old amiFamily to the v1 alias that selects the same EKS AMIs.
var aliasFamilies = map[string]string{
	"AL2": "al2", "AL2023": "al2023", "Bottlerocket": "bottlerocket",
	"Windows2019": "windows2019", "Windows2022": "windows2022", "Windows2025": "windows2025",
}

// legacyMetadataOptions are the v1alpha5 and v1beta1 defaults; v1 lowers the hop limit to
// 1, which breaks pods that reach IMDS through a container network hop.
var legacyMetadataOptions = awsv1.MetadataOptions{
	HTTPEndpoint: ptr.To("enabled"), HTTPProtocolIPv6: ptr.To("disabled"),
	HTTPPutResponseHopLimit: ptr.To[int64](2), HTTPTokens: ptr.To("required"),
}

// fromAWSNodeTemplate converts a v1alpha1 AWSNodeTemplate spec (or a Provisioner's inline
// provider) into a v1 EC2NodeClass spec.
func fromAWSNodeTemplate(t *awsNodeTemplateSpec, r *reporter) awsv1.EC2NodeClassSpec {
	spec := awsv1.EC2NodeClassSpec{
		UserData: t.UserData, Tags: t.Tags, BlockDeviceMappings: t.BlockDeviceMappings,
		DetailedMonitoring: t.DetailedMonitoring, Context: t.Context, MetadataOptions: t.MetadataOptions,
	}
	for _, id := range selectorIDs(t.SubnetSelector, "aws-ids", "subnetSelector", r) {
		spec.SubnetSelectorTerms = append(spec.SubnetSelectorTerms, awsv1.SubnetSelectorTerm{ID: id})
	}
	if tags := selectorTags(t.SubnetSelector, "aws-ids"); len(tags) > 0 && len(spec.SubnetSelectorTerms) == 0 {
		spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: tags}}
	}
	for _, id := range selectorIDs(t.SecurityGroupSelector, "aws-ids", "securityGroupSelector", r) {
		spec.SecurityGroupSelectorTerms = append(spec.SecurityGroupSelectorTerms, awsv1.SecurityGroupSelectorTerm{ID: id})
	}
	if tags := selectorTags(t.SecurityGroupSelector, "aws-ids"); len(tags) > 0 && len(spec.SecurityGroupSelectorTerms) == 0 {
		spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Tags: tags}}
	}
	if len(spec.SubnetSelectorTerms) == 0 {
		r.add(Error, "spec.subnetSelector", "no subnet selector: v1 requires subnetSelectorTerms")
	}
	if len(spec.SecurityGroupSelectorTerms) == 0 {
		r.add(Error, "spec.securityGroupSelector", "no security-group selector: v1 requires securityGroupSelectorTerms")
	}

	if t.InstanceProfile != nil {
		spec.InstanceProfile = t.InstanceProfile
		r.add(Info, "spec.instanceProfile", "kept as instanceProfile; v1 also takes role, and then manages the instance profile itself")
	} else {
		r.add(Error, "spec.instanceProfile", "none set: v1alpha5 fell back to the global aws.defaultInstanceProfile setting, which v1 does not have; set role or instanceProfile")
	}
	if t.LaunchTemplateName != nil {
		r.add(Error, "spec.launchTemplate", "launch template %q has no v1 equivalent: move its AMI, user data, block devices and security groups into the EC2NodeClass", *t.LaunchTemplateName)
	}
	if t.MetadataOptions == nil {
		spec.MetadataOptions = legacyMetadataOptions.DeepCopy()
		r.add(Warning, "spec.metadataOptions", "unset: the old default hop limit of 2 is written out; v1's default of 1 would cut off pods that reach IMDS through a container network hop")
	}
	amiTerms(t.AMIFamily, t.AMISelector, &spec, r)
	return spec
}

// amiTerms sets AMI selection from an old amiFamily and amiSelector.
func amiTerms(family *string, selector map[string]string, spec *awsv1.EC2NodeClassSpec, r *reporter) {
	fam := "AL2"
	if family != nil {
		fam = *family
	} else {
		r.add(Info, "spec.amiFamily", "unset: the old default AL2 is written out")
	}
	if fam == "Ubuntu" {
		r.add(Error, "spec.amiFamily", "Ubuntu was removed in v1: use amiFamily Custom with amiSelectorTerms for an Ubuntu EKS AMI and your own userData")
		return
	}
	if len(selector) == 0 {
		alias, ok := aliasFamilies[fam]
		if !ok {
			r.add(Error, "spec.amiFamily", "%s needs an amiSelector: v1 requires amiSelectorTerms", fam)
			return
		}
		spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: alias + "@latest"}}
		if fam == "AL2" {
			r.add(Warning, "spec.amiFamily", "mapped to alias al2@latest; EKS publishes no AL2 AMIs for Kubernetes 1.33 and later: plan a move to al2023")
		}
		return
	}
	spec.AMIFamily = ptr.To(fam)
	for _, id := range selectorIDs(selector, "aws::ids", "amiSelector", r) {
		spec.AMISelectorTerms = append(spec.AMISelectorTerms, awsv1.AMISelectorTerm{ID: id})
	}
	if len(spec.AMISelectorTerms) > 0 {
		return
	}
	tags := selectorTags(selector, "aws::ids", "aws::name", "aws::owners")
	owners := splitList(selector["aws::owners"])
	if len(owners) == 0 {
		owners = []string{""}
	}
	for _, owner := range owners {
		spec.AMISelectorTerms = append(spec.AMISelectorTerms, awsv1.AMISelectorTerm{Name: selector["aws::name"], Owner: owner, Tags: tags})
	}
}

// selectorIDs reads an old selector's comma-separated ids key; ids exclude every other key
// of the selector, as they do in v1 terms.
func selectorIDs(selector map[string]string, key, field string, r *reporter) []string {
	ids := splitList(selector[key])
	if len(ids) > 0 {
		if others := selectorTags(selector, key); len(others) > 0 {
			r.add(Warning, "spec."+field, "%s and other keys cannot be combined in v1: the ids are kept and %v dropped", key, slices.Sorted(maps.Keys(others)))
		}
	}
	return ids
}

// selectorTags are the selector's keys other than the special ones, as tag filters.
func selectorTags(selector map[string]string, special ...string) map[string]string {
	out := map[string]string{}
	for k, v := range selector {
		skip := false
		for _, s := range special {
			skip = skip || k == s
		}
		if !skip {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if p := strings.TrimSpace(part); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// fromV1beta1NodeClass fixes what changed between v1beta1 and v1 EC2NodeClasses.
func fromV1beta1NodeClass(spec awsv1.EC2NodeClassSpec, r *reporter) awsv1.EC2NodeClassSpec {
	if len(spec.AMISelectorTerms) == 0 {
		family := spec.AMIFamily
		spec.AMIFamily = nil
		amiTerms(family, nil, &spec, r)
	} else if spec.AMIFamily != nil && *spec.AMIFamily == "Ubuntu" {
		r.add(Error, "spec.amiFamily", "Ubuntu was removed in v1: use amiFamily Custom with your amiSelectorTerms and your own userData")
	}
	if spec.MetadataOptions == nil {
		spec.MetadataOptions = legacyMetadataOptions.DeepCopy()
		r.add(Warning, "spec.metadataOptions", "unset: the v1beta1 default hop limit of 2 is written out; v1's default of 1 would cut off pods that reach IMDS through a container network hop")
	}
	return spec
}
