module github.com/nodepulse/nodepulse/deploy/healthprobe

go 1.26.0
