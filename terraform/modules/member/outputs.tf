output "autoscaling_group_name" {
  description = "Name of the members' autoscaling group."
  value       = aws_autoscaling_group.this.name
}

output "launch_template_id" {
  description = "Id of the members' launch template."
  value       = aws_launch_template.this.id
}

