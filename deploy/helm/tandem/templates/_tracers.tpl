{{- /* Generated from the sampler's tracer table (sampler.ListedTracers) by
make reference (test/repo TestReferenceChartTracers): do not edit. */ -}}
{{- define "tandem.tracers" -}}
perl,php,python,hotspot,ruby,v8,dotnet,luajit,labels,beam
{{- end -}}
