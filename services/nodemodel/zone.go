// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package nodemodel

import "strings"

// ZoneKey is region + "\x00" + zone from the legacy failure-domain labels,
// falling back to the topology labels; "" when the node has neither.
func ZoneKey(labels map[string]string) string {
	region, zone := labels[LabelRegionLegacy], labels[LabelZoneLegacy]
	if region == "" {
		region = labels[LabelRegion]
	}
	if zone == "" {
		zone = labels[LabelZone]
	}
	if region == "" && zone == "" {
		return ""
	}
	return region + "\x00" + zone
}

// ZoneName renders a zone key for people and metric labels: "region/zone",
// or "zone" without a region.
func ZoneName(key string) string {
	if key == "" {
		return ""
	}
	region, zone, ok := strings.Cut(key, "\x00")
	if !ok {
		return key
	}
	if region == "" {
		return zone
	}
	return region + "/" + zone
}
