package render

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// TagClass is the EC2 tag every instance of a class carries, for cost allocation.
const TagClass = "poolsmith.dev/class"

// KarpenterDefaultMetadataOptions returns Karpenter's default instance metadata options,
// written out for every field the Baseline leaves unset. Each call returns fresh
// pointers, so a rendered object never aliases another.
func KarpenterDefaultMetadataOptions() awsv1.MetadataOptions {
	return awsv1.MetadataOptions{
		HTTPEndpoint:            ptr.To("enabled"),
		HTTPProtocolIPv6:        ptr.To("disabled"),
		HTTPPutResponseHopLimit: ptr.To[int64](1),
		HTTPTokens:              ptr.To("required"),
	}
}

// renderNodeClass merges the class's overrides and its profile onto the Baseline's
// EC2NodeClass spec, recording origins under "spec".
func (r *renderer) renderNodeClass() *awsv1.EC2NodeClass {
	o := origins{}
	spec := *r.baseline.Spec.NodeClass.DeepCopy()
	o.set("spec", OriginBaseline)
	over := r.class.Spec.NodeClass
	if over == nil {
		over = &v1alpha1.NodeClassOverrides{}
	}

	r.defaultMetadataOptions(&spec, o)

	if len(over.AMISelectorTerms) > 0 {
		// Replaced as a whole, with amiFamily: a Baseline amiFamily would contradict another
		// alias family.
		spec.AMISelectorTerms = over.AMISelectorTerms
		spec.AMIFamily = over.AMIFamily
		o.set("spec.amiSelectorTerms", OriginClass)
		o.set("spec.amiFamily", OriginClass)
		if spec.AMIFamily == nil && !hasAlias(spec.AMISelectorTerms) {
			r.invalid("spec.nodeClass.amiFamily", "is required when nodeClass.amiSelectorTerms hold no alias")
		}
	}

	spec.BlockDeviceMappings = r.mergeBlockDevices(spec, over.BlockDeviceMappings, o)
	spec.Tags = r.mergeTags(spec.Tags, over.Tags, o)
	spec.Kubelet = r.mergeKubelet(spec.Kubelet, over.Kubelet, o)

	if over.UserData != nil {
		if spec.UserData != nil {
			r.conflict("spec.nodeClass.userData", "the Baseline sets userData; a class may set it only when the Baseline has none")
		} else {
			spec.UserData = over.UserData
			o.set("spec.userData", OriginClass)
		}
	}
	if over.DetailedMonitoring != nil {
		spec.DetailedMonitoring = over.DetailedMonitoring
		o.set("spec.detailedMonitoring", OriginClass)
	}
	if over.InstanceStorePolicy != nil {
		spec.InstanceStorePolicy = over.InstanceStorePolicy
		o.set("spec.instanceStorePolicy", OriginClass)
	}

	nc := &awsv1.EC2NodeClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: NodeClassAPIVersion, Kind: "EC2NodeClass"},
		ObjectMeta: metav1.ObjectMeta{Name: r.class.Name, Labels: r.ownerLabels()},
		Spec:       spec,
	}
	o.set("metadata", OriginComputed("class"))
	o.set("apiVersion", OriginComputed("class"))
	o.set("kind", OriginComputed("class"))
	r.nodeClassOrigins = o
	return nc
}

func (r *renderer) defaultMetadataOptions(spec *awsv1.EC2NodeClassSpec, o origins) {
	if spec.MetadataOptions == nil {
		spec.MetadataOptions = &awsv1.MetadataOptions{}
	}
	m, d := spec.MetadataOptions, KarpenterDefaultMetadataOptions()
	fill := func(field string, isSet bool, setDefault func()) {
		if !isSet {
			setDefault()
			o.set("spec.metadataOptions."+field, OriginKarpenterDefault)
		}
	}
	fill("httpEndpoint", m.HTTPEndpoint != nil, func() { m.HTTPEndpoint = d.HTTPEndpoint })
	fill("httpProtocolIPv6", m.HTTPProtocolIPv6 != nil, func() { m.HTTPProtocolIPv6 = d.HTTPProtocolIPv6 })
	fill("httpPutResponseHopLimit", m.HTTPPutResponseHopLimit != nil, func() { m.HTTPPutResponseHopLimit = d.HTTPPutResponseHopLimit })
	fill("httpTokens", m.HTTPTokens != nil, func() { m.HTTPTokens = d.HTTPTokens })
}

func hasAlias(terms []awsv1.AMISelectorTerm) bool {
	for _, t := range terms {
		if t.Alias != "" {
			return true
		}
	}
	return false
}

// mergeBlockDevices merges the class's mappings onto the Baseline's by deviceName, field
// by field inside ebs, then applies the profile's minimum root volume size.
func (r *renderer) mergeBlockDevices(spec awsv1.EC2NodeClassSpec, class []*awsv1.BlockDeviceMapping, o origins) []*awsv1.BlockDeviceMapping {
	merged := spec.BlockDeviceMappings
	index := map[string]int{}
	for i, m := range merged {
		if m.DeviceName != nil {
			index[*m.DeviceName] = i
		}
	}
	for i, c := range class {
		if c.DeviceName == nil {
			r.invalid(fmt.Sprintf("spec.nodeClass.blockDeviceMappings[%d].deviceName", i), "is required: mappings are merged by device name")
			continue
		}
		path := "spec.blockDeviceMappings[" + *c.DeviceName + "]"
		j, ok := index[*c.DeviceName]
		if !ok {
			merged = append(merged, c.DeepCopy())
			index[*c.DeviceName] = len(merged) - 1
			o.set(path, OriginClass)
			continue
		}
		base := merged[j]
		if c.RootVolume && !base.RootVolume {
			base.RootVolume = true
			o.set(path+".rootVolume", OriginClass)
		}
		if c.EBS == nil {
			continue
		}
		if base.EBS == nil {
			base.EBS = &awsv1.BlockDevice{}
		}
		for _, f := range mergeEBS(base.EBS, c.EBS) {
			o.set(path+".ebs."+f, OriginClass)
		}
	}
	if min := r.profile.MinRootVolume; min != nil {
		merged = r.ensureRootVolume(merged, spec, *min, o)
	}
	return merged
}

// mergeEBS copies every field the class sets onto base and returns their JSON names.
func mergeEBS(base, class *awsv1.BlockDevice) []string {
	var set []string
	copyPtr := func(name string, dst, src any) {
		b, _ := json.Marshal(src)
		if string(b) == "null" {
			return
		}
		_ = json.Unmarshal(b, dst)
		set = append(set, name)
	}
	copyPtr("deleteOnTermination", &base.DeleteOnTermination, class.DeleteOnTermination)
	copyPtr("encrypted", &base.Encrypted, class.Encrypted)
	copyPtr("iops", &base.IOPS, class.IOPS)
	copyPtr("kmsKeyID", &base.KMSKeyID, class.KMSKeyID)
	copyPtr("snapshotID", &base.SnapshotID, class.SnapshotID)
	copyPtr("throughput", &base.Throughput, class.Throughput)
	copyPtr("volumeInitializationRate", &base.VolumeInitializationRate, class.VolumeInitializationRate)
	copyPtr("volumeSize", &base.VolumeSize, class.VolumeSize)
	copyPtr("volumeType", &base.VolumeType, class.VolumeType)
	return set
}

// ensureRootVolume raises the root volume to at least min. Without any mapping it adds one
// for the AMI family's root device, encrypted gp3, as Karpenter's own default would be.
func (r *renderer) ensureRootVolume(merged []*awsv1.BlockDeviceMapping, spec awsv1.EC2NodeClassSpec, min resource.Quantity, o origins) []*awsv1.BlockDeviceMapping {
	origin := OriginProfile(string(r.profileName))
	var root *awsv1.BlockDeviceMapping
	for _, m := range merged {
		if m.RootVolume {
			root = m
		}
	}
	if root == nil && len(merged) == 0 {
		device := "/dev/xvda"
		if family(spec) == awsv1.AMIFamilyBottlerocket {
			device = "/dev/xvdb" // Bottlerocket's data volume holds images and pods.
		}
		root = &awsv1.BlockDeviceMapping{DeviceName: &device, RootVolume: true, EBS: &awsv1.BlockDevice{
			VolumeType: ptr.To("gp3"), Encrypted: ptr.To(true), DeleteOnTermination: ptr.To(true),
		}}
		merged = append(merged, root)
		o.set("spec.blockDeviceMappings["+device+"]", origin)
	}
	if root == nil {
		return merged // mappings exist but none is marked root: leave them as written
	}
	if root.EBS == nil {
		root.EBS = &awsv1.BlockDevice{}
	}
	if root.EBS.VolumeSize == nil || root.EBS.VolumeSize.Cmp(min) < 0 {
		root.EBS.VolumeSize = ptr.To(min.DeepCopy())
		o.set("spec.blockDeviceMappings["+ptrString(root.DeviceName)+"].ebs.volumeSize", origin)
	}
	return merged
}

func family(spec awsv1.EC2NodeClassSpec) string {
	nc := awsv1.EC2NodeClass{Spec: spec}
	return nc.AMIFamily()
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// mergeTags adds the class's tags to the Baseline's, refusing a different value for a
// Baseline key, and adds the class tag.
func (r *renderer) mergeTags(base map[string]string, class v1alpha1.Tags, o origins) map[string]string {
	tags := map[string]string{}
	for k, v := range base {
		tags[k] = v
	}
	for _, k := range slices.Sorted(maps.Keys(class)) {
		v := class[k]
		if bv, ok := base[k]; ok {
			if bv != v {
				r.conflict("spec.nodeClass.tags["+k+"]", fmt.Sprintf("class value %q contradicts the Baseline's mandatory value %q", v, bv))
			}
			continue
		}
		tags[k] = v
		o.set("spec.tags["+k+"]", OriginClass)
	}
	if v, ok := tags[TagClass]; ok && v != r.class.Name {
		r.conflict("spec.nodeClass.tags["+TagClass+"]", fmt.Sprintf("is set by Poolsmith to the class name %q, not %q", r.class.Name, v))
	}
	tags[TagClass] = r.class.Name
	o.set("spec.tags["+TagClass+"]", OriginComputed("class"))
	return tags
}

// mergeKubelet merges the class's kubelet configuration onto the Baseline's key by key
// (nested objects key by key too; the class wins) and validates the result as Karpenter
// does.
func (r *renderer) mergeKubelet(base, class awsv1.KubeletConfiguration, o origins) awsv1.KubeletConfiguration {
	merged := awsv1.KubeletConfiguration{}
	for k, v := range base {
		merged[k] = v
	}
	for _, k := range slices.Sorted(maps.Keys(class)) {
		v := class[k]
		if bv, ok := merged[k]; ok {
			combined, err := mergeJSON(bv.Raw, v.Raw, "spec.kubelet."+k, o)
			if err != nil {
				r.invalid("spec.nodeClass.kubelet."+k, err.Error())
				continue
			}
			merged[k] = apiextensionsv1.JSON{Raw: combined}
			continue
		}
		merged[k] = v
		o.set("spec.kubelet."+k, OriginClass)
	}
	if len(merged) == 0 {
		return nil
	}
	field := "baseline.spec.nodeClass.kubelet"
	if len(class) > 0 {
		field = "spec.nodeClass.kubelet"
	}
	for _, err := range awsv1.ValidateKubeletConfig(merged) {
		r.invalid(field, err.Error())
	}
	return merged
}

// mergeJSON merges two JSON objects key by key (the second wins); any other value is
// replaced by the second. It records class origins for what the second sets.
func mergeJSON(base, class []byte, path string, o origins) ([]byte, error) {
	var b, c any
	if err := json.Unmarshal(base, &b); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(class, &c); err != nil {
		return nil, err
	}
	bm, bok := b.(map[string]any)
	cm, cok := c.(map[string]any)
	if !bok || !cok {
		o.set(path, OriginClass)
		return class, nil
	}
	for k, v := range cm {
		bm[k] = v
		o.set(path+"["+k+"]", OriginClass)
	}
	return json.Marshal(bm)
}
