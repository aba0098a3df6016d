module github.com/nodepulse/nodepulse/collector

go 1.26.0
